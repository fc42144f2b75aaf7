//! Charts drawn on the server as inline SVG (no chart script; the CSP is
//! unchanged: colours come from the style sheet's classes, never a `style`
//! attribute). Every point carries its bucket and value (`data-start`,
//! `data-value`) and a `<title>` a screen reader and a pointer read; the axes,
//! the unit and the range are written out.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};

/// Escapes text for HTML and SVG.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
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

/// What a value is measured in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A ratio from 0 to 1, shown as a percentage.
    Ratio,
    /// Milliseconds.
    Millis,
    /// A count of something (named).
    Count(&'static str),
}

impl Unit {
    /// The axis' label.
    pub fn label(self) -> &'static str {
        match self {
            Unit::Ratio => "%",
            Unit::Millis => "ms",
            Unit::Count(what) => what,
        }
    }

    /// A value as shown.
    pub fn show(self, value: f64) -> String {
        match self {
            Unit::Ratio => format!("{:.1} %", value * 100.0),
            Unit::Millis => format!("{value:.0} ms"),
            Unit::Count(what) => format!("{value:.0} {what}"),
        }
    }
}

/// One line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Its name in the legend.
    pub label: String,
    /// Its colour's class (`s0` to `s3`).
    pub class: &'static str,
    /// Each bucket's start and value (none: nothing in the bucket).
    pub points: Vec<(DateTime<Utc>, Option<f64>)>,
}

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 240.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 40.0;

fn stamp(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M").to_string()
}

/// A line chart over `(from, to)` of `series` in `unit`.
pub fn line_chart(
    id: &str,
    title: &str,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    unit: Unit,
    series: &[Series],
) -> String {
    let values = series
        .iter()
        .flat_map(|s| s.points.iter().filter_map(|p| p.1));
    let top = match unit {
        Unit::Ratio => 1.0,
        _ => values.fold(0.0f64, f64::max).max(1.0),
    };
    let buckets = series.iter().map(|s| s.points.len()).max().unwrap_or(0);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x = |i: usize| {
        if buckets <= 1 {
            LEFT + plot_w / 2.0
        } else {
            LEFT + plot_w * i as f64 / (buckets - 1) as f64
        }
    };
    let y = |v: f64| TOP + plot_h * (1.0 - v / top);
    let id = esc(id);
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<figure class="chart" id="{id}"><svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-labelledby="{id}-title" xmlns="http://www.w3.org/2000/svg"><title id="{id}-title">{} ({}), {} to {} UTC</title>"#,
        esc(title),
        unit.label(),
        stamp(from),
        stamp(to)
    );
    // The y axis: five ticks with their values.
    for tick in 0..=4 {
        let v = top * f64::from(tick) / 4.0;
        let ty = y(v);
        let label = match unit {
            Unit::Ratio => format!("{:.0}", v * 100.0),
            _ => format!("{v:.0}"),
        };
        let _ = write!(
            svg,
            r#"<line class="grid" x1="{LEFT}" x2="{}" y1="{ty:.1}" y2="{ty:.1}"/><text class="tick" x="{}" y="{:.1}" text-anchor="end">{label}</text>"#,
            WIDTH - RIGHT,
            LEFT - 6.0,
            ty + 4.0
        );
    }
    let _ = write!(
        svg,
        r#"<text class="axis" x="12" y="{:.1}" transform="rotate(-90 12 {:.1})" text-anchor="middle">{}</text>"#,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0,
        esc(unit.label())
    );
    // The x axis: the first, middle and last buckets named.
    if let Some(first) = series.iter().find(|s| !s.points.is_empty()) {
        let mut named = vec![0, buckets / 2, buckets.saturating_sub(1)];
        named.dedup();
        for i in named {
            if let Some((at, _)) = first.points.get(i) {
                let anchor = if i == 0 {
                    "start"
                } else if i + 1 == buckets {
                    "end"
                } else {
                    "middle"
                };
                let _ = write!(
                    svg,
                    r#"<text class="tick" x="{:.1}" y="{}" text-anchor="{anchor}">{}</text>"#,
                    x(i),
                    HEIGHT - BOTTOM + 16.0,
                    stamp(*at)
                );
            }
        }
    }
    let _ = write!(
        svg,
        r#"<text class="axis" x="{:.1}" y="{}" text-anchor="middle">time (UTC)</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 6.0
    );
    for s in series {
        // A line per run of buckets with a value.
        let mut run: Vec<String> = Vec::new();
        let mut lines = Vec::new();
        for (i, (_, v)) in s.points.iter().enumerate() {
            match v {
                Some(v) => run.push(format!("{:.1},{:.1}", x(i), y(*v))),
                None if !run.is_empty() => lines.push(std::mem::take(&mut run)),
                None => {}
            }
        }
        if !run.is_empty() {
            lines.push(run);
        }
        for line in lines {
            let _ = write!(
                svg,
                r#"<polyline class="line {}" fill="none" points="{}"/>"#,
                s.class,
                line.join(" ")
            );
        }
        for (i, (at, v)) in s.points.iter().enumerate() {
            if let Some(v) = v {
                let _ = write!(
                    svg,
                    r#"<circle class="point {}" cx="{:.1}" cy="{:.1}" r="3" data-series="{}" data-start="{}" data-value="{v}"><title>{}: {} at {} UTC</title></circle>"#,
                    s.class,
                    x(i),
                    y(*v),
                    esc(&s.label),
                    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    esc(&s.label),
                    unit.show(*v),
                    stamp(*at)
                );
            }
        }
    }
    svg.push_str("</svg><figcaption>");
    for s in series {
        let _ = write!(
            svg,
            r#"<span class="legend {}">{}</span> "#,
            s.class,
            esc(&s.label)
        );
    }
    let _ = write!(
        svg,
        "{} to {} UTC</figcaption></figure>",
        stamp(from),
        stamp(to)
    );
    svg
}

/// A heat map's row: its label and each bucket's count.
pub type HeatRow = (String, Vec<(DateTime<Utc>, u64)>);

/// A heat map: one row per label, one cell per bucket, shaded by its count
/// (written in each cell's title too).
pub fn heatmap(id: &str, title: &str, rows: &[HeatRow]) -> String {
    let max = rows
        .iter()
        .flat_map(|r| r.1.iter().map(|c| c.1))
        .max()
        .unwrap_or(0)
        .max(1);
    let columns = rows.iter().map(|r| r.1.len()).max().unwrap_or(0).max(1);
    let label_w = 160.0;
    let cell_w = ((WIDTH - label_w - RIGHT) / columns as f64).max(2.0);
    let cell_h = 18.0;
    let height = TOP + cell_h * rows.len() as f64 + BOTTOM;
    let id = esc(id);
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<figure class="chart" id="{id}"><svg viewBox="0 0 {WIDTH} {height}" role="img" aria-labelledby="{id}-title" xmlns="http://www.w3.org/2000/svg"><title id="{id}-title">{}</title>"#,
        esc(title)
    );
    for (r, (label, cells)) in rows.iter().enumerate() {
        let ty = TOP + cell_h * r as f64;
        // A long label shows its end (the full one is each cell's title).
        let count = label.chars().count();
        let shown: String = if count > 24 {
            let tail: String = label.chars().skip(count - 23).collect();
            format!("…{tail}")
        } else {
            label.clone()
        };
        let _ = write!(
            svg,
            r#"<text class="tick" x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            label_w - 6.0,
            ty + 13.0,
            esc(&shown)
        );
        for (c, (at, count)) in cells.iter().enumerate() {
            let shade = if *count == 0 {
                0
            } else {
                1 + (count * 3 / max).min(3)
            };
            let _ = write!(
                svg,
                r#"<rect class="heat h{shade}" x="{:.1}" y="{ty:.1}" width="{:.1}" height="{}" data-start="{}" data-value="{count}"><title>{}: {count} at {} UTC</title></rect>"#,
                label_w + cell_w * c as f64,
                cell_w - 1.0,
                cell_h - 2.0,
                at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                esc(label),
                stamp(*at)
            );
        }
    }
    let _ = write!(
        svg,
        r#"<text class="axis" x="{:.1}" y="{:.1}" text-anchor="middle">time (UTC), darker is more</text></svg></figure>"#,
        label_w + (WIDTH - label_w) / 2.0,
        height - 8.0
    );
    svg
}

/// One number, with its unit.
pub fn stat(id: &str, value: Option<f64>, unit: Unit) -> String {
    match value {
        Some(v) => format!(
            r#"<p class="stat" id="{}"><span class="stat-value" data-value="{v}">{}</span></p>"#,
            esc(id),
            esc(&unit.show(v))
        ),
        None => format!(
            r#"<p class="stat" id="{}"><span class="stat-value">no data</span></p>"#,
            esc(id)
        ),
    }
}

/// A table: its column names and rows of cells.
pub fn table(id: &str, caption: &str, head: &[&str], rows: &[Vec<String>]) -> String {
    let mut html = format!(
        r#"<table id="{}"><caption>{}</caption><thead><tr>"#,
        esc(id),
        esc(caption)
    );
    for h in head {
        let _ = write!(html, r#"<th scope="col">{}</th>"#, esc(h));
    }
    html.push_str("</tr></thead><tbody>");
    for row in rows {
        html.push_str("<tr>");
        for cell in row {
            let _ = write!(html, "<td>{}</td>", esc(cell));
        }
        html.push_str("</tr>");
    }
    if rows.is_empty() {
        let _ = write!(
            html,
            r#"<tr><td colspan="{}">Nothing in the range.</td></tr>"#,
            head.len().max(1)
        );
    }
    html.push_str("</tbody></table>");
    html
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn points_carry_their_values_and_text_is_escaped() {
        let at = Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap();
        let svg = line_chart(
            "c",
            "<script>",
            (at, at + chrono::Duration::days(2)),
            Unit::Ratio,
            &[Series {
                label: "rate \"x\"".to_owned(),
                class: "s0",
                points: vec![(at, Some(0.5)), (at + chrono::Duration::days(1), None)],
            }],
        );
        assert!(svg.contains(r#"data-value="0.5""#));
        assert!(svg.contains("&lt;script&gt;") && !svg.contains("<script>"));
        assert!(svg.contains("rate &quot;x&quot;"));
        assert!(!svg.contains("style="));
        assert_eq!(svg.matches("<circle").count(), 1);
    }
}
