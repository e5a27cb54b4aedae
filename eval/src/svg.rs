//! Two small SVG line charts, written by hand (no plotting dependency): a latency CDF with a
//! logarithmic x axis, and cost against compromise window with both axes logarithmic.

use std::fmt::Write;

const W: f64 = 720.0;
const H: f64 = 420.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 230.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 50.0;
const COLORS: [&str; 6] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
];

/// One named line of `(x, y)` points.
#[derive(Debug)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Points, in drawing order.
    pub points: Vec<(f64, f64)>,
}

struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
}

impl Axis {
    fn frac(&self, v: f64) -> f64 {
        if self.log {
            (v.max(self.lo).log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }

    fn ticks(&self) -> Vec<f64> {
        if self.log {
            let (a, b) = (
                self.lo.log10().floor() as i32,
                self.hi.log10().ceil() as i32,
            );
            (a..=b)
                .map(|e| 10f64.powi(e))
                .filter(|t| *t >= self.lo && *t <= self.hi)
                .collect()
        } else {
            (0..=4)
                .map(|i| self.lo + (self.hi - self.lo) * f64::from(i) / 4.0)
                .collect()
        }
    }
}

fn label(v: f64) -> String {
    if v >= 1000.0 || (v > 0.0 && v < 0.01) {
        format!("{v:.0e}")
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn chart(title: &str, xl: &str, yl: &str, x: &Axis, y: &Axis, series: &[Series]) -> String {
    let pw = W - LEFT - RIGHT;
    let ph = H - TOP - BOTTOM;
    let px = |v: f64| LEFT + x.frac(v).clamp(0.0, 1.0) * pw;
    let py = |v: f64| TOP + (1.0 - y.frac(v).clamp(0.0, 1.0)) * ph;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="18" text-anchor="middle" font-size="14">{}</text>"#,
        LEFT + pw / 2.0,
        escape(title)
    );
    for t in x.ticks() {
        let _ = writeln!(
            s,
            r##"<line x1="{0:.1}" y1="{TOP}" x2="{0:.1}" y2="{1:.1}" stroke="#ddd"/><text x="{0:.1}" y="{2:.1}" text-anchor="middle">{3}</text>"##,
            px(t),
            TOP + ph,
            TOP + ph + 16.0,
            label(t)
        );
    }
    for t in y.ticks() {
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="#ddd"/><text x="{2:.1}" y="{3:.1}" text-anchor="end">{4}</text>"##,
            py(t),
            LEFT + pw,
            LEFT - 6.0,
            py(t) + 4.0,
            label(t)
        );
    }
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>"##
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        LEFT + pw / 2.0,
        H - 12.0,
        escape(xl)
    );
    let _ = writeln!(
        s,
        r#"<text x="16" y="{0}" text-anchor="middle" transform="rotate(-90 16 {0})">{1}</text>"#,
        TOP + ph / 2.0,
        escape(yl)
    );
    for (i, ser) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        // Past the palette, the same colours dashed.
        let dash = if i >= COLORS.len() {
            r#" stroke-dasharray="6 3""#
        } else {
            ""
        };
        let pts: Vec<String> = ser
            .points
            .iter()
            .map(|&(a, b)| format!("{:.1},{:.1}", px(a), py(b)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2"{dash} points="{}"/>"#,
            pts.join(" ")
        );
        let ly = TOP + 10.0 + 18.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{0}" y1="{1}" x2="{2}" y2="{1}" stroke="{c}" stroke-width="3"{dash}/><text x="{3}" y="{4}">{5}</text>"#,
            LEFT + pw + 10.0,
            ly,
            LEFT + pw + 30.0,
            LEFT + pw + 36.0,
            ly + 4.0,
            escape(&ser.name)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// A CDF of each series' values (sorted ascending), x logarithmic.
pub fn cdf(title: &str, xl: &str, series: &[(String, Vec<f64>)]) -> String {
    let lo = series
        .iter()
        .filter_map(|(_, v)| v.first().copied())
        .fold(f64::INFINITY, f64::min)
        .max(0.01);
    let hi = series
        .iter()
        .filter_map(|(_, v)| v.get(v.len() * 999 / 1000).copied())
        .fold(lo * 10.0, f64::max);
    let lines: Vec<Series> = series
        .iter()
        .map(|(name, v)| {
            // At most ~400 points per line: every quantile step of 0.25%.
            let n = v.len().max(1);
            let step = (n / 400).max(1);
            let points = (0..n)
                .step_by(step)
                .chain([n - 1])
                .filter_map(|i| v.get(i).map(|x| (*x, (i + 1) as f64 / n as f64)))
                .collect();
            Series {
                name: name.clone(),
                points,
            }
        })
        .collect();
    chart(
        title,
        xl,
        "fraction of events",
        &Axis {
            lo: 10f64.powf(lo.log10().floor()),
            hi: 10f64.powf(hi.log10().ceil()),
            log: true,
        },
        &Axis {
            lo: 0.0,
            hi: 1.0,
            log: false,
        },
        &lines,
    )
}

/// Lines on log-log axes.
pub fn loglog(title: &str, xl: &str, yl: &str, series: &[Series]) -> String {
    let all = || series.iter().flat_map(|s| s.points.iter());
    let (mut xlo, mut xhi, mut ylo, mut yhi) = (f64::INFINITY, 0f64, f64::INFINITY, 0f64);
    for &(x, y) in all() {
        xlo = xlo.min(x);
        xhi = xhi.max(x);
        ylo = ylo.min(y);
        yhi = yhi.max(y);
    }
    let bounds = |lo: f64, hi: f64| {
        let lo = lo.max(1e-9);
        Axis {
            lo: 10f64.powf(lo.log10().floor()),
            hi: 10f64.powf(hi.max(lo * 10.0).log10().ceil()),
            log: true,
        }
    };
    chart(title, xl, yl, &bounds(xlo, xhi), &bounds(ylo, yhi), series)
}
