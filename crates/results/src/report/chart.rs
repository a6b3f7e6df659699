//! Line charts as SVG text: one chart, its series and their ceilings, with axes a reader can
//! check against the table. No script: a tooltip per point is SVG's own `<title>`.

use std::fmt::Write;

/// Colours that stay apart for colour-blind readers and on white (Okabe and Ito's set).
const PALETTE: [&str; 8] = ["#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000", "#999933"];

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 340.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 36.0;
const BOTTOM: f64 = 48.0;

/// One line: measured points, and the ceiling at the same x where there is one.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub ceiling: Vec<(f64, f64)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// What the dashed lines are, in the legend.
    pub ceiling_note: String,
    /// Names of the x positions 0, 1, …, where x is a list of settings, not a number.
    pub x_names: Vec<String>,
}

/// Where values land on one axis.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Scale {
    lo: f64,
    hi: f64,
    log: bool,
}

impl Scale {
    /// x: logarithmic when every value is positive and they span a factor of 8 or more
    /// (prompt lengths and concurrencies double from point to point).
    fn x(values: &[f64]) -> Scale {
        let (lo, hi) = bounds(values);
        if lo > 0.0 && hi / lo >= 8.0 {
            Scale { lo, hi, log: true }
        } else if hi > lo {
            Scale { lo, hi, log: false }
        } else {
            Scale { lo: lo - 1.0, hi: hi + 1.0, log: false }
        }
    }

    /// y: linear from zero to a round number above the highest value, so heights compare.
    fn y(values: &[f64]) -> Scale {
        let (_, hi) = bounds(values);
        Scale { lo: 0.0, hi: nice_above(hi), log: false }
    }

    /// The fraction of the axis `v` sits at.
    fn at(&self, v: f64) -> f64 {
        if self.log {
            (v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }
}

fn bounds(values: &[f64]) -> (f64, f64) {
    let finite = values.iter().copied().filter(|v| v.is_finite());
    let lo = finite.clone().fold(f64::INFINITY, f64::min);
    let hi = finite.fold(f64::NEG_INFINITY, f64::max);
    if lo.is_finite() {
        (lo, hi)
    } else {
        (0.0, 1.0)
    }
}

/// The least of 1, 2, 2.5 or 5 × 10^k at or above `v` (1 for nothing above zero).
pub fn nice_above(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let base = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * base).find(|&n| n >= v * (1.0 - 1e-12)).unwrap_or(10.0 * base)
}

/// A value as an axis or tooltip label: no more digits than it needs.
pub fn label(v: f64) -> String {
    let a = v.abs();
    if a > 0.0 && a < 0.01 {
        // A divergence of 1e-4 is not 0.00.
        format!("{v:.1e}")
    } else if a >= 100.0 || v == v.round() {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Text as it may stand in XML.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

impl Chart {
    pub fn svg(&self) -> String {
        let xs: Vec<f64> = self.series.iter().flat_map(|s| s.points.iter().chain(&s.ceiling).map(|p| p.0)).collect();
        let ys: Vec<f64> = self.series.iter().flat_map(|s| s.points.iter().chain(&s.ceiling).map(|p| p.1)).collect();
        // Named settings sit half a step in from the edges, where their names fit.
        let sx = if self.x_names.is_empty() { Scale::x(&xs) } else { Scale { lo: -0.5, hi: self.x_names.len() as f64 - 0.5, log: false } };
        let sy = Scale::y(&ys);
        let plot_w = WIDTH - LEFT - RIGHT;
        let plot_h = HEIGHT - TOP - BOTTOM;
        let px = |x: f64| LEFT + sx.at(x) * plot_w;
        let py = |y: f64| TOP + (1.0 - sy.at(y)) * plot_h;

        let mut o = String::new();
        let _ = write!(
            o,
            r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{}" class="chart">"#,
            escape(&self.title)
        );
        let _ = write!(o, r#"<text x="{LEFT}" y="20" class="title">{}</text>"#, escape(&self.title));
        // y grid and ticks: five steps of a round size.
        for i in 0..=5 {
            let v = sy.hi * f64::from(i) / 5.0;
            let y = py(v);
            let _ = write!(o, r#"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" class="grid"/>"#, WIDTH - RIGHT);
            let _ = write!(o, r#"<text x="{}" y="{:.1}" class="tick" text-anchor="end">{}</text>"#, LEFT - 6.0, y + 4.0, label(v));
        }
        // x ticks at the measured values: the settings the sweep chose.
        let mut ticks: Vec<f64> = xs.iter().copied().filter(|v| v.is_finite()).collect();
        ticks.sort_by(f64::total_cmp);
        ticks.dedup();
        let mut last_tick = f64::NEG_INFINITY;
        for v in ticks {
            let x = px(v);
            if x - last_tick < 28.0 {
                continue;
            }
            last_tick = x;
            let _ = write!(o, r#"<line x1="{x:.1}" x2="{x:.1}" y1="{:.1}" y2="{:.1}" class="axis"/>"#, TOP + plot_h, TOP + plot_h + 4.0);
            let _ = write!(o, r#"<text x="{x:.1}" y="{:.1}" class="tick" text-anchor="middle">{}</text>"#, TOP + plot_h + 18.0, escape(&self.x_text(v)));
        }
        let _ = write!(o, r#"<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{:.1}" class="axis"/>"#, TOP + plot_h);
        let _ = write!(o, r#"<line x1="{LEFT}" x2="{}" y1="{:.1}" y2="{:.1}" class="axis"/>"#, WIDTH - RIGHT, TOP + plot_h, TOP + plot_h);
        let log = if sx.log { " (log scale)" } else { "" };
        let _ = write!(o, r#"<text x="{:.1}" y="{:.1}" class="label" text-anchor="middle">{}{log}</text>"#, LEFT + plot_w / 2.0, HEIGHT - 8.0, escape(&self.x_label));
        let _ = write!(
            o,
            r#"<text x="14" y="{:.1}" class="label" text-anchor="middle" transform="rotate(-90 14 {:.1})">{}</text>"#,
            TOP + plot_h / 2.0,
            TOP + plot_h / 2.0,
            escape(&self.y_label)
        );
        for (i, s) in self.series.iter().enumerate() {
            let colour = PALETTE[i % PALETTE.len()];
            let path = |pts: &[(f64, f64)]| pts.iter().map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y))).collect::<Vec<_>>().join(" ");
            if !s.ceiling.is_empty() {
                let _ = write!(o, r#"<polyline points="{}" class="ceiling" stroke="{colour}"><title>{} ceiling</title></polyline>"#, path(&s.ceiling), escape(&s.label));
            }
            let _ = write!(o, r#"<polyline points="{}" class="series" stroke="{colour}"/>"#, path(&s.points));
            for &(x, y) in &s.points {
                let _ = write!(
                    o,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{colour}"><title>{}: {} at {}</title></circle>"#,
                    px(x),
                    py(y),
                    escape(&s.label),
                    label(y),
                    escape(&self.x_text(x))
                );
            }
        }
        o.push_str("</svg>");
        o
    }

    /// How x value `v` is written: its name, or the number.
    fn x_text(&self, v: f64) -> String {
        match self.x_names.get(v as usize) {
            Some(name) if v >= 0.0 && v.fract() == 0.0 => name.clone(),
            _ => label(v),
        }
    }

    /// The legend as HTML (it wraps, where SVG text would not): a swatch and a label per
    /// series, and what the dashed line is.
    pub fn legend(&self) -> String {
        let mut o = String::from(r#"<ul class="legend">"#);
        for (i, s) in self.series.iter().enumerate() {
            let _ = write!(o, r#"<li><span class="swatch" style="background:{}"></span>{}</li>"#, PALETTE[i % PALETTE.len()], escape(&s.label));
        }
        if self.series.iter().any(|s| !s.ceiling.is_empty()) {
            let _ = write!(o, r#"<li><span class="dash"></span>{} (dashed, in the curve's colour)</li>"#, escape(&self.ceiling_note));
        }
        o.push_str("</ul>");
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_tops_and_labels() {
        assert_eq!(nice_above(0.0), 1.0);
        assert_eq!(nice_above(7.3), 10.0);
        assert_eq!(nice_above(10.0), 10.0);
        assert_eq!(nice_above(11.0), 20.0);
        assert_eq!(nice_above(212.0), 250.0);
        assert_eq!(nice_above(0.031), 0.05);
        assert_eq!((label(1024.0), label(67.46), label(3.14159), label(2.0)), ("1024".into(), "67.5".into(), "3.14".into(), "2".into()));
        assert_eq!(escape(r#"a<b & "c">"#), "a&lt;b &amp; &quot;c&quot;&gt;");
    }

    #[test]
    fn doubling_settings_get_a_log_axis_and_land_where_they_should() {
        let x = Scale::x(&[64.0, 128.0, 256.0, 512.0]);
        assert!(x.log);
        assert!((x.at(64.0)).abs() < 1e-12 && (x.at(512.0) - 1.0).abs() < 1e-12);
        // On a log axis every doubling is the same step.
        assert!((x.at(128.0) - 1.0 / 3.0).abs() < 1e-12 && (x.at(256.0) - 2.0 / 3.0).abs() < 1e-12);
        assert!(!Scale::x(&[1.0, 2.0, 4.0]).log);
        let one = Scale::x(&[8.0]);
        assert_eq!((one.lo, one.hi), (7.0, 9.0));
        let y = Scale::y(&[0.5, 37.0]);
        assert_eq!((y.lo, y.hi, y.at(25.0)), (0.0, 50.0, 0.5));
    }

    #[test]
    fn every_point_is_drawn_with_its_tooltip_and_every_ceiling_dashed() {
        let chart = Chart {
            x_names: Vec::new(),
            title: "decode <tok/s>".into(),
            x_label: "concurrency".into(),
            y_label: "tok/s".into(),
            ceiling_note: "ceiling".into(),
            series: vec![
                Series { label: "llama continuous".into(), points: vec![(1.0, 60.0), (4.0, 40.0), (16.0, 20.0)], ceiling: vec![(1.0, 150.0), (4.0, 140.0), (16.0, 90.0)] },
                Series { label: "candle continuous".into(), points: vec![(1.0, 30.0)], ceiling: vec![] },
            ],
        };
        let svg = chart.svg();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert_eq!(svg.matches("<circle").count(), 4);
        assert_eq!(svg.matches(r#"class="ceiling""#).count(), 1);
        assert_eq!(svg.matches(r#"class="series""#).count(), 2);
        assert!(svg.contains("<title>llama continuous: 40 at 4</title>"), "{svg}");
        assert!(svg.contains("decode &lt;tok/s&gt;") && !svg.contains("<tok/s>"));
        assert!(svg.contains("(log scale)"));
        // The y axis reaches the highest ceiling: 150 → 200 at the top.
        assert!(svg.contains(">200</text>"));
        let legend = chart.legend();
        assert_eq!(legend.matches("<li>").count(), 3);

        // Named settings along x: the ticks and tooltips say their names.
        let named = Chart { x_names: vec!["1 client".into(), "4 clients".into()], series: vec![Series { label: "here".into(), points: vec![(0.0, 20.0), (1.0, 50.0)], ceiling: vec![] }], ..chart };
        let svg = named.svg();
        assert!(svg.contains(">4 clients</text>") && svg.contains("<title>here: 50 at 4 clients</title>") && !svg.contains("log scale"), "{svg}");
    }
}
