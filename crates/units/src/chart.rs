//! A small SVG writer for the models' charts: line charts (optionally log-x), stacked
//! bar charts and heatmaps, with axis titles that carry units, a legend, and marked points.
//! Every series is a `<g class="series" data-name="...">` so tests (and people with a
//! text editor) can find it.

use std::fmt::Write;

const W: f64 = 980.0;
const H: f64 = 440.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 330.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;
const COLORS: [&str; 8] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];

pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

pub struct Mark {
    pub x: f64,
    pub y: f64,
    pub label: String,
}

pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    pub series: Vec<Series>,
    pub marks: Vec<Mark>,
}

pub struct StackedBars {
    pub title: String,
    pub y_label: String,
    /// One bar per category.
    pub categories: Vec<String>,
    /// Segments: (name, value per category).
    pub segments: Vec<(String, Vec<f64>)>,
}

fn escape(text: &str) -> String {
    // XML 1.0 allows no control characters but tab, newline and carriage return.
    let text: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn nice_ticks(lo: f64, hi: f64, count: usize) -> Vec<f64> {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
        return vec![lo];
    }
    let raw = (hi - lo) / count as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|&s| s >= raw).unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() * step;
    let mut ticks = Vec::new();
    let mut t = first;
    while t <= hi + step * 1e-9 {
        ticks.push(t);
        t += step;
    }
    ticks
}

fn tick_label(v: f64) -> String {
    crate::units::trim_float(v, 4)
}

fn frame(out: &mut String, title: &str, x_label: &str, y_label: &str) {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text class="title" x="{}" y="24" text-anchor="middle" font-size="15">{}</text>
<text class="axis-label x" x="{}" y="{}" text-anchor="middle">{}</text>
<text class="axis-label y" transform="translate(18,{}) rotate(-90)" text-anchor="middle">{}</text>
<line x1="{LEFT}" y1="{}" x2="{}" y2="{}" stroke="black"/>
<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{}" stroke="black"/>
"#,
        (LEFT + W - RIGHT) / 2.0,
        escape(title),
        (LEFT + W - RIGHT) / 2.0,
        H - 16.0,
        escape(x_label),
        (TOP + H - BOTTOM) / 2.0,
        escape(y_label),
        H - BOTTOM,
        W - RIGHT,
        H - BOTTOM,
        H - BOTTOM
    );
}

fn y_ticks(out: &mut String, y1: f64, py: &dyn Fn(f64) -> f64) {
    for t in nice_ticks(0.0, y1, 5) {
        let _ = writeln!(
            out,
            r#"<text class="tick y" x="{}" y="{}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            py(t) + 4.0,
            tick_label(t)
        );
    }
}

fn legend(out: &mut String, names: &[String]) {
    for (i, name) in names.iter().enumerate() {
        let y = TOP + 10.0 + i as f64 * 20.0;
        let _ = writeln!(
            out,
            r#"<g class="legend"><rect x="{}" y="{}" width="14" height="10" fill="{}"/><text x="{}" y="{}">{}</text></g>"#,
            W - RIGHT + 12.0,
            y - 9.0,
            COLORS[i % COLORS.len()],
            W - RIGHT + 32.0,
            y,
            escape(name)
        );
    }
}

impl LineChart {
    pub fn svg(&self) -> String {
        let fx = |x: f64| if self.log_x { x.max(f64::MIN_POSITIVE).log10() } else { x };
        let pts: Vec<(f64, f64)> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().copied())
            .filter(|p| p.0.is_finite() && p.1.is_finite())
            .collect();
        let (mut x0, mut x1) =
            pts.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| (a.min(fx(p.0)), b.max(fx(p.0))));
        let y1 = pts.iter().fold(0.0f64, |a, p| a.max(p.1)) * 1.08;
        let y1 = if y1 > 0.0 { y1 } else { 1.0 };
        if x1.partial_cmp(&x0) != Some(std::cmp::Ordering::Greater) {
            x0 -= 1.0;
            x1 += 1.0;
        }
        let px = |x: f64| LEFT + (fx(x) - x0) / (x1 - x0) * (W - LEFT - RIGHT);
        let py = |y: f64| H - BOTTOM - y / y1 * (H - TOP - BOTTOM);
        let mut out = String::new();
        frame(&mut out, &self.title, &self.x_label, &self.y_label);
        y_ticks(&mut out, y1, &py);
        let xticks: Vec<f64> = if self.log_x {
            (x0.floor() as i32..=x1.ceil() as i32)
                .map(|e| 10f64.powi(e))
                .filter(|&v| fx(v) >= x0 - 1e-9 && fx(v) <= x1 + 1e-9)
                .collect()
        } else {
            nice_ticks(x0, x1, 6)
        };
        for t in xticks {
            // Powers of ten on a log axis read as 1e3, 1e6, ... so that they fit.
            let label = if self.log_x { format!("1e{}", t.log10().round()) } else { tick_label(t) };
            let _ = writeln!(
                out,
                r#"<text class="tick x" x="{}" y="{}" text-anchor="middle">{}</text>"#,
                px(t),
                H - BOTTOM + 16.0,
                label
            );
        }
        for (i, s) in self.series.iter().enumerate() {
            let path: Vec<String> = s
                .points
                .iter()
                .filter(|p| p.0.is_finite() && p.1.is_finite())
                .map(|&(x, y)| format!("{:.2},{:.2}", px(x), py(y)))
                .collect();
            let _ = writeln!(
                out,
                r#"<g class="series" data-name="{}"><polyline fill="none" stroke="{}" stroke-width="2" points="{}"/></g>"#,
                escape(&s.name),
                COLORS[i % COLORS.len()],
                path.join(" ")
            );
        }
        for m in &self.marks {
            let _ =
                write!(out, r#"<g class="mark"><circle cx="{:.2}" cy="{:.2}" r="4" fill="black"/>"#, px(m.x), py(m.y));
            if !m.label.is_empty() {
                let _ = write!(
                    out,
                    r#"<text x="{:.2}" y="{:.2}">{}</text>"#,
                    px(m.x) + 6.0,
                    py(m.y) - 6.0,
                    escape(&m.label)
                );
            }
            out.push_str("</g>\n");
        }
        legend(&mut out, &self.series.iter().map(|s| s.name.clone()).collect::<Vec<_>>());
        out.push_str("</svg>\n");
        out
    }
}

impl StackedBars {
    pub fn svg(&self) -> String {
        let totals: Vec<f64> = (0..self.categories.len())
            .map(|c| self.segments.iter().map(|(_, v)| v.get(c).copied().unwrap_or(0.0)).sum())
            .collect();
        let y1 = totals.iter().copied().fold(0.0, f64::max) * 1.1;
        let y1 = if y1 > 0.0 { y1 } else { 1.0 };
        let py = |y: f64| H - BOTTOM - y / y1 * (H - TOP - BOTTOM);
        let slot = (W - LEFT - RIGHT) / self.categories.len().max(1) as f64;
        let mut out = String::new();
        frame(&mut out, &self.title, "", &self.y_label);
        y_ticks(&mut out, y1, &py);
        for (c, name) in self.categories.iter().enumerate() {
            // Long names wrap onto lines that fit the bar's slot.
            let per_line = ((slot / 6.5) as usize).max(8);
            let mut lines: Vec<String> = vec![String::new()];
            for word in name.split_whitespace() {
                let last = lines.last_mut().expect("one line");
                if !last.is_empty() && last.len() + 1 + word.len() > per_line {
                    lines.push(word.to_string());
                } else {
                    if !last.is_empty() {
                        last.push(' ');
                    }
                    last.push_str(word);
                }
            }
            let x = LEFT + slot * (c as f64 + 0.5);
            let _ = write!(
                out,
                r#"<text class="tick x category" x="{x:.2}" y="{}" text-anchor="middle">"#,
                H - BOTTOM + 16.0
            );
            for (i, line) in lines.iter().enumerate() {
                let _ = write!(
                    out,
                    r#"<tspan x="{x:.2}" dy="{}">{}</tspan>"#,
                    if i == 0 { 0.0 } else { 13.0 },
                    escape(line)
                );
            }
            out.push_str("</text>\n");
            let _ = writeln!(
                out,
                r#"<text class="total" x="{:.2}" y="{:.2}" text-anchor="middle">{}</text>"#,
                LEFT + slot * (c as f64 + 0.5),
                py(totals[c]) - 6.0,
                tick_label(totals[c])
            );
        }
        for (i, (name, values)) in self.segments.iter().enumerate() {
            let _ = write!(out, r#"<g class="series" data-name="{}">"#, escape(name));
            for (c, &v) in values.iter().enumerate() {
                let below: f64 = self.segments[..i].iter().map(|(_, vs)| vs.get(c).copied().unwrap_or(0.0)).sum();
                if v > 0.0 {
                    let _ = write!(
                        out,
                        r#"<rect x="{:.2}" y="{:.2}" width="{:.2}" height="{:.2}" fill="{}"/>"#,
                        LEFT + slot * c as f64 + slot * 0.2,
                        py(below + v),
                        slot * 0.6,
                        py(below) - py(below + v),
                        COLORS[i % COLORS.len()]
                    );
                }
            }
            out.push_str("</g>\n");
        }
        legend(&mut out, &self.segments.iter().map(|s| s.0.clone()).collect::<Vec<_>>());
        out.push_str("</svg>\n");
        out
    }
}

/// One bar of a Gantt chart: a row, a span of time, a colour class and words.
pub struct Bar {
    pub row: usize,
    pub start: f64,
    pub end: f64,
    pub class: usize,
    pub title: String,
}

/// Bars over time, one row per named track (phases of a collective, jobs of a run).
pub struct Gantt {
    pub title: String,
    pub x_label: String,
    pub rows: Vec<String>,
    pub bars: Vec<Bar>,
    /// Names of the colour classes, for the legend.
    pub classes: Vec<String>,
}

impl Gantt {
    pub fn svg(&self) -> String {
        let x1 = self.bars.iter().map(|b| b.end).filter(|x| x.is_finite()).fold(0.0f64, f64::max);
        let x1 = if x1 > 0.0 { x1 } else { 1.0 };
        let px = |x: f64| LEFT + x / x1 * (W - LEFT - RIGHT);
        let rows = self.rows.len().max(1) as f64;
        let band = (H - TOP - BOTTOM) / rows;
        let mut out = String::new();
        frame(&mut out, &self.title, &self.x_label, "");
        for t in nice_ticks(0.0, x1, 6) {
            let _ = writeln!(
                out,
                r#"<text class="tick x" x="{:.2}" y="{}" text-anchor="middle">{}</text>"#,
                px(t),
                H - BOTTOM + 16.0,
                tick_label(t)
            );
        }
        for (r, name) in self.rows.iter().enumerate() {
            let y = TOP + band * (r as f64 + 0.5);
            // Row names sit inside the plot's left edge, over the bars' lane.
            let _ = writeln!(
                out,
                r#"<text class="row" x="{:.2}" y="{:.2}" font-size="10" fill="dimgray">{}</text>"#,
                LEFT + 4.0,
                y - band * 0.3,
                escape(name)
            );
        }
        for b in &self.bars {
            if !(b.start.is_finite() && b.end.is_finite()) {
                continue;
            }
            let y = TOP + band * (b.row as f64 + 0.25);
            let _ = writeln!(
                out,
                r#"<g class="bar"><rect x="{:.2}" y="{:.2}" width="{:.2}" height="{:.2}" fill="{}"><title>{}</title></rect></g>"#,
                px(b.start),
                y,
                (px(b.end) - px(b.start)).max(0.5),
                band * 0.5,
                COLORS[b.class % COLORS.len()],
                escape(&b.title)
            );
        }
        legend(&mut out, &self.classes);
        out.push_str("</svg>\n");
        out
    }
}

/// A grid of cells coloured by value (low light, high dark), each with its value written
/// in it: one quantity over two categorical axes (the best time over two sweep axes).
pub struct Heatmap {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub columns: Vec<String>,
    pub rows: Vec<String>,
    /// `values[row][column]`; None draws an empty cell.
    pub values: Vec<Vec<Option<f64>>>,
    /// How a value is written in its cell.
    pub format: fn(f64) -> String,
}

/// The most rows or columns a heatmap draws (the rest would not be legible).
pub const MAX_HEATMAP_SIDE: usize = 64;

impl Heatmap {
    pub fn svg(&self) -> String {
        let (nc, nr) = (self.columns.len().clamp(1, MAX_HEATMAP_SIDE), self.rows.len().clamp(1, MAX_HEATMAP_SIDE));
        let known = self.values.iter().flatten().flatten().copied().filter(|v| v.is_finite());
        let (lo, hi) = known.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
        // Log colour scale when the values span decades (times across sizes do).
        let log = lo > 0.0 && hi / lo > 100.0;
        let t = |v: f64| {
            let (v, lo, hi) = if log { (v.log10(), lo.log10(), hi.log10()) } else { (v, lo, hi) };
            if hi > lo {
                (v - lo) / (hi - lo)
            } else {
                0.5
            }
        };
        // From a light yellow to a dark blue.
        let colour = |t: f64| {
            let mix = |a: f64, b: f64| (a + (b - a) * t.clamp(0.0, 1.0)).round() as u8;
            format!("#{:02x}{:02x}{:02x}", mix(255.0, 8.0), mix(247.0, 48.0), mix(188.0, 107.0))
        };
        let (cw, ch) = ((W - LEFT - RIGHT) / nc as f64, (H - TOP - BOTTOM) / nr as f64);
        let mut out = String::new();
        frame(&mut out, &self.title, &self.x_label, &self.y_label);
        for (c, name) in self.columns.iter().take(nc).enumerate() {
            let _ = writeln!(
                out,
                r#"<text class="tick x" x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
                LEFT + (c as f64 + 0.5) * cw,
                H - BOTTOM + 16.0,
                escape(name)
            );
        }
        for (r, name) in self.rows.iter().take(nr).enumerate() {
            let y = TOP + (r as f64 + 0.5) * ch;
            // Row names right of the grid, where line charts have their legend: long
            // names (topology specs) have room there.
            let _ = writeln!(
                out,
                r#"<text class="tick y" x="{}" y="{:.1}" text-anchor="start">{}</text>"#,
                W - RIGHT + 8.0,
                y + 4.0,
                escape(name)
            );
            for c in 0..nc {
                let Some(v) = self.values.get(r).and_then(|row| row.get(c)).copied().flatten() else { continue };
                let x = LEFT + c as f64 * cw;
                let dark = t(v) > 0.55;
                let _ = writeln!(
                    out,
                    r#"<g class="cell"><rect x="{x:.1}" y="{:.1}" width="{cw:.1}" height="{ch:.1}" fill="{}" stroke="white"/><text x="{:.1}" y="{:.1}" text-anchor="middle" fill="{}" font-size="10">{}</text></g>"#,
                    TOP + r as f64 * ch,
                    colour(t(v)),
                    x + cw / 2.0,
                    y + 4.0,
                    if dark { "white" } else { "black" },
                    escape(&(self.format)(v))
                );
            }
        }
        out.push_str("</svg>\n");
        out
    }
}

/// Several charts one above the other in one SVG document.
pub fn stack(charts: &[String]) -> String {
    let mut out = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{}" viewBox="0 0 {W} {}">"#,
        H * charts.len() as f64,
        H * charts.len() as f64
    );
    out.push('\n');
    for (i, c) in charts.iter().enumerate() {
        out += &c.replacen("<svg ", &format!(r#"<svg y="{}" "#, H * i as f64), 1);
    }
    out.push_str("</svg>\n");
    out
}
