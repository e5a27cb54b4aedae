//! The report as PDF, printed by a headless Chromium.

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
};

/// Why a PDF could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PdfError {
    /// No headless Chromium on this machine.
    #[error(
        "--pdf needs a headless Chromium to print the report, and none was found (AFR_CHROMIUM, \
         or chromium, chromium-browser or google-chrome on PATH): install one (Debian and Ubuntu: \
         `apt-get install chromium`; the project's scripts/setup.sh does), or set AFR_CHROMIUM to \
         its path; or write the report with --html FILE and print it to PDF from any browser \
         (the print layout is the same)"
    )]
    NoRenderer,
    /// The private working directory or the HTML could not be written.
    #[error("cannot prepare the report for printing")]
    Temp(#[source] std::io::Error),
    /// The renderer could not be started.
    #[error("cannot run {}", renderer.display())]
    Spawn {
        /// The renderer.
        renderer: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The renderer ran and wrote no PDF.
    #[error("{} did not print the report ({status}): {stderr}", renderer.display())]
    Failed {
        /// The renderer.
        renderer: PathBuf,
        /// Its exit status.
        status: String,
        /// The end of what it wrote on stderr.
        stderr: String,
    },
}

/// The headless Chromium used for `--pdf`: `AFR_CHROMIUM` if set, else the first of
/// `chromium`, `chromium-browser` and `google-chrome` on `PATH`.
pub fn find_renderer() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("AFR_CHROMIUM").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
        .find(|p| p.is_file())
}

/// A private directory (mode 0700) under the system's temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> std::io::Result<TempDir> {
        use std::os::unix::fs::DirBuilderExt as _;
        let base = std::env::temp_dir();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let mut last = None;
        for i in 0..16u32 {
            let p = base.join(format!("afr-report-{}-{nanos}-{i}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&p) {
                Ok(()) => return Ok(TempDir(p)),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no temporary directory")))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `file://` URL of an absolute path, bytes outside `[A-Za-z0-9/._-]` percent-encoded.
fn file_url(p: &Path) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let mut s = String::from("file://");
    for &b in p.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/._-".contains(&b) {
            s.push(b as char);
        } else {
            let _ = write!(s, "%{b:02X}");
        }
    }
    s
}

/// How long the renderer may take.
const RENDER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(180);

/// Prints `html` to a PDF at `out` with a headless Chromium ([`find_renderer`]): the HTML is
/// written to a private temporary directory (with the renderer's profile), rendered with
/// `--print-to-pdf`, and the PDF copied to `out`; the directory is removed. Errors writing
/// `out` itself are returned as [`std::io::Error`] inside `Ok(Err(_))`, so the caller can name
/// the file.
pub fn print_pdf(html: &str, out: &Path) -> Result<std::io::Result<()>, PdfError> {
    let renderer = find_renderer().ok_or(PdfError::NoRenderer)?;
    let dir = TempDir::new().map_err(PdfError::Temp)?;
    let page = dir.0.join("report.html");
    let pdf = dir.0.join("report.pdf");
    std::fs::write(&page, html).map_err(PdfError::Temp)?;
    let err_path = dir.0.join("stderr");
    let err_file = std::fs::File::create(&err_path).map_err(PdfError::Temp)?;
    let mut child = std::process::Command::new(&renderer)
        // The document is this tool's own, holds no script and loads nothing (its CSP says
        // so); Chromium's sandbox cannot start as root or in many containers.
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-extensions",
            "--no-first-run",
            "--no-default-browser-check",
            "--no-pdf-header-footer",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.0.join("profile").display()
        ))
        .arg(format!("--print-to-pdf={}", pdf.display()))
        .arg(file_url(&page))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(err_file)
        .spawn()
        .map_err(|source| PdfError::Spawn {
            renderer: renderer.clone(),
            source,
        })?;
    let start = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s.to_string(),
            Ok(None) if start.elapsed() > RENDER_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                break format!("killed after {} s", RENDER_TIMEOUT.as_secs());
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(50)),
            Err(e) => break e.to_string(),
        }
    };
    let ok = std::fs::read(&pdf).is_ok_and(|b| b.starts_with(b"%PDF"));
    if !ok {
        let text = std::fs::read_to_string(&err_path).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(PdfError::Failed {
            renderer,
            status,
            stderr: afr_core::text::escape(&tail.join(" | ")).into_owned(),
        });
    }
    Ok(std::fs::copy(&pdf, out).map(|_| ()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_urls_are_percent_encoded() {
        assert_eq!(
            file_url(Path::new("/tmp/a b/r#1.html")),
            "file:///tmp/a%20b/r%231.html"
        );
    }
}
