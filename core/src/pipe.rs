//! Commands whose reader goes away (`afr-verify … | head`) exit quietly.
//!
//! Rust ignores `SIGPIPE`, so a write to a closed pipe fails with `EPIPE`: `println!` panics
//! with a backtrace, and a `writeln!` returns an error a command would print. Neither is news
//! to the person who closed the pipe. A command calls [`quiet_on_broken_pipe`] first thing in
//! `main` and exits with [`EXIT_BROKEN_PIPE`] when [`is_broken_pipe`] says its error is one,
//! the status a shell reports for a process killed by `SIGPIPE` (128 + 13).

use std::error::Error;

/// The exit status of a command whose output pipe closed: 128 + `SIGPIPE`.
pub const EXIT_BROKEN_PIPE: u8 = 141;

/// Installs a panic hook under which a panic from printing to a closed pipe ends the process
/// quietly with [`EXIT_BROKEN_PIPE`]; every other panic is reported as before.
pub fn quiet_on_broken_pipe() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let text = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if text.starts_with("failed printing to std") && text.contains("os error 32") {
            std::process::exit(i32::from(EXIT_BROKEN_PIPE));
        }
        report(info);
    }));
}

/// Whether `e`, or an error it was caused by, is a write to a closed pipe.
pub fn is_broken_pipe(e: &(dyn Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if err
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        {
            return true;
        }
        cur = err.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("writing the report")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn a_broken_pipe_is_found_under_other_errors() {
        let pipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert!(is_broken_pipe(&Outer(pipe)));
        let other = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert!(!is_broken_pipe(&Outer(other)));
    }
}
