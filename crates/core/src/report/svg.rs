//! Inline SVG charts for the HTML report: a line chart (series of points,
//! reference lines, shaded bands, highlighted points) and a horizontal bar
//! chart. Output is deterministic — coordinates with one decimal, labels
//! with fixed precision — so golden files stay stable. Colours come from
//! CSS classes (`s0`…`s5`, `bad`, `band`), so the page's light and dark
//! themes apply; every data point is an element with class `pt` (or `bar`)
//! and `data-x`/`data-y` attributes, with a `<title>` as its tooltip.

use std::fmt::Write;

const W: f64 = 520.0;
const H: f64 = 300.0;
const LEFT: f64 = 58.0;
const RIGHT: f64 = 14.0;
const TOP: f64 = 14.0;
const BOTTOM: f64 = 44.0;

/// One line of a chart.
pub(crate) struct Series {
    pub name: String,
    /// Colour slot: 0..=5.
    pub colour: usize,
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
    /// A circle (with its tooltip) per point; off for a computed curve of
    /// many points, drawn as a line alone.
    pub markers: bool,
}

/// A horizontal reference line, e.g. a tier's core count.
pub(crate) struct HLine {
    pub y: f64,
    pub label: String,
    pub colour: usize,
}

/// A vertical marker, e.g. the saturation point.
pub(crate) struct VLine {
    pub x: f64,
    pub label: String,
    /// CSS class of the line: `mark` or `bad`.
    pub class: &'static str,
}

/// A shaded x-range, e.g. warm-up or the client-bottleneck region.
pub(crate) struct Band {
    pub x0: f64,
    pub x1: f64,
    pub label: String,
    /// CSS class: `band` (neutral) or `band bad`.
    pub class: &'static str,
}

/// A vertical error bar: the 95% interval around a measured point.
pub(crate) struct ErrorBar {
    pub x: f64,
    pub lo: f64,
    pub hi: f64,
    /// Colour slot of the point's series.
    pub colour: usize,
}

/// A point drawn over the series to single it out.
pub(crate) struct Highlight {
    pub x: f64,
    pub y: f64,
    pub label: String,
}

pub(crate) struct LineChart {
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    pub hlines: Vec<HLine>,
    pub vlines: Vec<VLine>,
    pub bands: Vec<Band>,
    pub highlights: Vec<Highlight>,
    pub error_bars: Vec<ErrorBar>,
    /// Draw a circle per point (off for dense time series: they get `pt`
    /// circles too, but smaller).
    pub dense: bool,
}

impl LineChart {
    pub(crate) fn new(x_label: &str, y_label: &str) -> LineChart {
        LineChart {
            x_label: x_label.into(),
            y_label: y_label.into(),
            series: Vec::new(),
            hlines: Vec::new(),
            vlines: Vec::new(),
            bands: Vec::new(),
            highlights: Vec::new(),
            error_bars: Vec::new(),
            dense: false,
        }
    }

    pub(crate) fn render(&self, aria: &str) -> String {
        let xs = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0));
        let xs: Vec<f64> = xs
            .chain(self.vlines.iter().map(|v| v.x))
            .filter(|x| x.is_finite())
            .collect();
        let ys = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1));
        let ys: Vec<f64> = ys
            .chain(self.hlines.iter().map(|h| h.y))
            .chain(self.error_bars.iter().flat_map(|e| [e.lo, e.hi]))
            .filter(|y| y.is_finite())
            .collect();
        let x_axis = Axis::new(0.0, max_of(&xs), LEFT, W - RIGHT);
        let y_axis = Axis::from_zero(&ys, H - BOTTOM, TOP);
        let mut s = open_svg(aria);
        for b in &self.bands {
            let (a, z) = (x_axis.map(b.x0), x_axis.map(b.x1.min(x_axis.hi)));
            let _ = write!(
                s,
                r#"<rect class="{}" x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect><text class="bandlabel" x="{}" y="{}">{}</text>"#,
                b.class,
                f1(a),
                f1(TOP),
                f1((z - a).max(0.0)),
                f1(H - BOTTOM - TOP),
                esc(&b.label),
                f1(a + 3.0),
                f1(H - BOTTOM - 5.0),
                esc(&b.label)
            );
        }
        draw_axes(&mut s, &x_axis, &y_axis, &self.x_label, &self.y_label);
        for h in &self.hlines {
            let y = y_axis.map(h.y);
            let _ = write!(
                s,
                r#"<line class="ref s{c}" x1="{}" x2="{}" y1="{y}" y2="{y}"/><text class="reflabel s{c}" x="{}" y="{}">{}</text>"#,
                f1(LEFT),
                f1(W - RIGHT),
                f1(LEFT + 4.0),
                f1(y_axis.map(h.y) - 4.0),
                esc(&h.label),
                c = h.colour % 6,
                y = f1(y),
            );
        }
        for (i, v) in self.vlines.iter().enumerate() {
            let x = x_axis.map(v.x);
            let anchor = if x > W * 0.7 { "end" } else { "start" };
            let dx = if anchor == "end" { -4.0 } else { 4.0 };
            let _ = write!(
                s,
                r#"<line class="vmark {}" x1="{x}" x2="{x}" y1="{}" y2="{}"/><text class="marklabel {}" x="{}" y="{}" text-anchor="{anchor}">{}</text>"#,
                v.class,
                f1(TOP),
                f1(H - BOTTOM),
                v.class,
                f1(x + dx),
                f1(TOP + 12.0 + 14.0 * i as f64),
                esc(&v.label),
                x = f1(x),
            );
        }
        // Under the points, so their tooltips stay on top.
        for e in self.error_bars.iter().filter(|e| e.hi > e.lo) {
            let (x, lo, hi) = (
                x_axis.map(e.x),
                y_axis.map(e.lo.max(y_axis.lo)),
                y_axis.map(e.hi),
            );
            let _ = write!(
                s,
                r#"<path class="err s{}" data-x="{}" data-lo="{}" data-hi="{}" d="M{},{}V{}M{},{}H{}M{},{}H{}"><title>95% interval: {} to {} at {}</title></path>"#,
                e.colour % 6,
                num(e.x),
                num(e.lo),
                num(e.hi),
                f1(x),
                f1(lo),
                f1(hi),
                f1(x - 3.0),
                f1(lo),
                f1(x + 3.0),
                f1(x - 3.0),
                f1(hi),
                f1(x + 3.0),
                num(e.lo),
                num(e.hi),
                num(e.x),
            );
        }
        let r = if self.dense { 1.6 } else { 3.2 };
        for (k, series) in self.series.iter().enumerate() {
            let c = series.colour % 6;
            let path: Vec<String> = series
                .points
                .iter()
                .map(|&(x, y)| format!("{},{}", f1(x_axis.map(x)), f1(y_axis.map(y))))
                .collect();
            let dash = if series.dashed { " dashed" } else { "" };
            let _ = write!(
                s,
                r#"<polyline class="line s{c}{dash}" data-series="{k}" points="{}"/>"#,
                path.join(" ")
            );
            for &(x, y) in series.points.iter().filter(|_| series.markers) {
                let _ = write!(
                    s,
                    r#"<circle class="pt s{c}" data-series="{k}" data-x="{}" data-y="{}" cx="{}" cy="{}" r="{r}"><title>{}: {} at {}</title></circle>"#,
                    num(x),
                    num(y),
                    f1(x_axis.map(x)),
                    f1(y_axis.map(y)),
                    esc(&series.name),
                    num(y),
                    num(x),
                );
            }
        }
        for h in &self.highlights {
            let _ = write!(
                s,
                r#"<circle class="hl bad" data-x="{}" data-y="{}" cx="{}" cy="{}" r="6"><title>{}</title></circle>"#,
                num(h.x),
                num(h.y),
                f1(x_axis.map(h.x)),
                f1(y_axis.map(h.y)),
                esc(&h.label)
            );
        }
        s.push_str("</svg>");
        s
    }
}

/// Horizontal bars: one group per category (a request), one bar per key
/// (a tier) in the group.
pub(crate) struct BarChart {
    pub x_label: String,
    pub categories: Vec<String>,
    pub keys: Vec<String>,
    /// `values[category][key]`.
    pub values: Vec<Vec<f64>>,
}

impl BarChart {
    pub(crate) fn render(&self, aria: &str) -> String {
        let bar = 14.0;
        let gap = 10.0;
        let group = bar * self.keys.len().max(1) as f64 + gap;
        let left = 110.0;
        let height = TOP + group * self.categories.len() as f64 + BOTTOM;
        let all: Vec<f64> = self.values.iter().flatten().copied().collect();
        let x_axis = Axis::new(0.0, max_of(&all), left, W - RIGHT - 40.0);
        let mut s = format!(
            r#"<svg class="chart" viewBox="0 0 {} {}" width="100%" role="img" aria-label="{}">"#,
            W,
            f1(height),
            esc(aria)
        );
        let bottom = height - BOTTOM;
        for t in &x_axis.ticks {
            let x = f1(x_axis.map(*t));
            let _ = write!(
                s,
                r#"<line class="grid" x1="{x}" x2="{x}" y1="{}" y2="{}"/><text class="tick" x="{x}" y="{}" text-anchor="middle">{}</text>"#,
                f1(TOP),
                f1(bottom),
                f1(bottom + 16.0),
                x_axis.label(*t)
            );
        }
        let _ = write!(
            s,
            r#"<line class="axis" x1="{l}" x2="{l}" y1="{}" y2="{}"/><text class="axislabel" x="{}" y="{}" text-anchor="middle">{}</text>"#,
            f1(TOP),
            f1(bottom),
            f1((left + W - RIGHT - 40.0) / 2.0),
            f1(bottom + 36.0),
            esc(&self.x_label),
            l = f1(left),
        );
        for (i, (cat, row)) in self.categories.iter().zip(&self.values).enumerate() {
            let y0 = TOP + group * i as f64 + gap / 2.0;
            let _ = write!(
                s,
                r#"<text class="tick" x="{}" y="{}" text-anchor="end">{}</text>"#,
                f1(left - 6.0),
                f1(y0 + group / 2.0 - gap / 2.0 + 4.0),
                esc(cat)
            );
            for (j, (key, v)) in self.keys.iter().zip(row).enumerate() {
                let y = y0 + bar * j as f64;
                let w = x_axis.map(*v) - left;
                let _ = write!(
                    s,
                    r#"<rect class="bar s{c}" data-x="{}" data-y="{}" x="{}" y="{}" width="{}" height="{}"><title>{} on {}: {} ms</title></rect><text class="barlabel" x="{}" y="{}">{}</text>"#,
                    num(*v),
                    esc(cat),
                    f1(left),
                    f1(y + 1.0),
                    f1(w.max(0.0)),
                    f1(bar - 2.0),
                    esc(cat),
                    esc(key),
                    num(*v),
                    f1(left + w + 4.0),
                    f1(y + bar - 3.0),
                    num(*v),
                    c = j % 6,
                );
            }
        }
        s.push_str("</svg>");
        s
    }
}

fn open_svg(aria: &str) -> String {
    format!(
        r#"<svg class="chart" viewBox="0 0 {W} {H}" width="100%" role="img" aria-label="{}">"#,
        esc(aria)
    )
}

fn draw_axes(s: &mut String, x: &Axis, y: &Axis, x_label: &str, y_label: &str) {
    let bottom = H - BOTTOM;
    for t in &y.ticks {
        let py = f1(y.map(*t));
        let _ = write!(
            s,
            r#"<line class="grid" x1="{}" x2="{}" y1="{py}" y2="{py}"/><text class="tick" x="{}" y="{}" text-anchor="end">{}</text>"#,
            f1(LEFT),
            f1(W - RIGHT),
            f1(LEFT - 6.0),
            f1(y.map(*t) + 4.0),
            y.label(*t)
        );
    }
    for t in &x.ticks {
        let px = f1(x.map(*t));
        let _ = write!(
            s,
            r#"<line class="tickmark" x1="{px}" x2="{px}" y1="{}" y2="{}"/><text class="tick" x="{px}" y="{}" text-anchor="middle">{}</text>"#,
            f1(bottom),
            f1(bottom + 4.0),
            f1(bottom + 17.0),
            x.label(*t)
        );
    }
    let _ = write!(
        s,
        r#"<line class="axis" x1="{l}" x2="{}" y1="{b}" y2="{b}"/><line class="axis" x1="{l}" x2="{l}" y1="{}" y2="{b}"/><text class="axislabel" x="{}" y="{}" text-anchor="middle">{}</text><text class="axislabel" transform="translate(14 {}) rotate(-90)" text-anchor="middle">{}</text>"#,
        f1(W - RIGHT),
        f1(TOP),
        f1((LEFT + W - RIGHT) / 2.0),
        f1(H - 6.0),
        esc(x_label),
        f1((TOP + bottom) / 2.0),
        esc(y_label),
        l = f1(LEFT),
        b = f1(bottom),
    );
}

/// A linear axis from `lo` to a "nice" top, mapped onto pixels `p0..p1`.
struct Axis {
    lo: f64,
    hi: f64,
    p0: f64,
    p1: f64,
    step: f64,
    ticks: Vec<f64>,
}

impl Axis {
    fn new(lo: f64, max: f64, p0: f64, p1: f64) -> Axis {
        let max = if max.is_finite() && max > lo {
            max
        } else {
            lo + 1.0
        };
        Axis::with_step(lo, max, nice_step((max - lo) / 5.0), p0, p1)
    }

    /// From `lo` by `step` to the first tick at or past `max`.
    fn with_step(lo: f64, max: f64, step: f64, p0: f64, p1: f64) -> Axis {
        let hi = lo + ((max - lo) / step - 1e-9).ceil().max(1.0) * step;
        let n = ((hi - lo) / step).round() as usize;
        Axis {
            lo,
            hi,
            p0,
            p1,
            step,
            ticks: (0..=n).map(|i| lo + step * i as f64).collect(),
        }
    }

    /// From zero to the largest of `values`, or from a round step below
    /// zero when some are negative (a lag that shrinks, an interval that
    /// reaches below zero).
    fn from_zero(values: &[f64], p0: f64, p1: f64) -> Axis {
        let (low, max) = (values.iter().copied().fold(0.0, f64::min), max_of(values));
        if low >= 0.0 {
            return Axis::new(0.0, max, p0, p1);
        }
        // The step depends on the span, and the span on where it starts:
        // the step only grows, so the loop ends, and the axis starts on a
        // multiple of the step it uses (0 is a tick).
        let max = max.max(0.0);
        let mut step = nice_step((max - low) / 5.0);
        let mut lo = (low / step).floor() * step;
        loop {
            let wider = nice_step((max - lo) / 5.0);
            if wider <= step {
                break;
            }
            step = wider;
            lo = (low / step).floor() * step;
        }
        Axis::with_step(lo, max, step, p0, p1)
    }

    fn map(&self, v: f64) -> f64 {
        self.p0 + (v - self.lo) / (self.hi - self.lo) * (self.p1 - self.p0)
    }

    fn label(&self, v: f64) -> String {
        let decimals = (-self.step.log10().floor()).max(0.0) as usize;
        format!("{v:.decimals$}")
    }
}

/// The step of 1, 2 or 5 × 10^k at or above `raw`.
fn nice_step(raw: f64) -> f64 {
    let raw = raw.max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let n = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    n * mag
}

fn max_of(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
}

/// A pixel coordinate: one decimal.
fn f1(v: f64) -> String {
    format!("{v:.1}")
}

/// A data value: up to three decimals, trailing zeros dropped.
pub(crate) fn num(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

/// A number with a fixed count of decimals.
pub(crate) fn fnum(v: f64, decimals: usize) -> String {
    format!("{v:.decimals$}")
}

/// Escapes text for HTML content, SVG text and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps_and_ticks() {
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(13.0), 20.0);
        assert_eq!(nice_step(240.0), 500.0);
        let a = Axis::new(0.0, 248.8, 0.0, 100.0);
        assert_eq!(a.ticks, vec![0.0, 50.0, 100.0, 150.0, 200.0, 250.0]);
        assert_eq!(a.label(50.0), "50");
        let b = Axis::new(0.0, 0.62, 0.0, 100.0);
        assert_eq!(b.label(0.2), "0.2");
    }

    #[test]
    fn an_axis_reaches_below_zero_on_its_own_steps() {
        // Values all at or above zero: the axis from zero, as before.
        let up = Axis::from_zero(&[3.0, 248.8], 0.0, 100.0);
        assert_eq!(up.ticks, Axis::new(0.0, 248.8, 0.0, 100.0).ticks);
        for (low, high) in [
            (-4.5, 4.5),
            (-34.4, 16.6),
            (-9.7, 317.7),
            (-0.3, 0.0),
            (-120.0, -5.0),
        ] {
            let a = Axis::from_zero(&[low, high], 0.0, 100.0);
            assert!(
                a.lo <= low && a.hi >= high.max(0.0),
                "{low}..{high}: {:?}",
                a.ticks
            );
            // Every tick a multiple of the step, zero among them.
            assert!(
                a.ticks
                    .iter()
                    .all(|t| ((t / a.step).round() * a.step - t).abs() < 1e-9),
                "{low}..{high}: {:?} by {}",
                a.ticks,
                a.step
            );
            assert!(
                a.ticks.iter().any(|t| t.abs() < 1e-9),
                "{low}..{high}: {:?}",
                a.ticks
            );
        }
    }

    #[test]
    fn points_are_counted_elements() {
        let mut c = LineChart::new("users", "req/s");
        c.series.push(Series {
            name: "throughput".into(),
            colour: 0,
            points: vec![(1.0, 2.0), (10.0, 19.5), (20.0, 30.25)],
            dashed: false,
            markers: true,
        });
        let svg = c.render("throughput vs users");
        assert_eq!(svg.matches(r#"<circle class="pt s0""#).count(), 3);
        assert!(svg.contains(r#"data-x="20" data-y="30.25""#));
        assert!(svg.starts_with("<svg class=\"chart\" viewBox=\"0 0 520 300\" width=\"100%\""));
        assert_eq!(svg, c.render("throughput vs users"), "deterministic");
    }

    #[test]
    fn numbers_are_fixed() {
        assert_eq!(num(2.0), "2");
        assert_eq!(num(0.1234), "0.123");
        assert_eq!(num(-0.0001), "0");
    }
}
