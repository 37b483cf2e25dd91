//! `commute --report DIR`: the pair matrix as an HTML page that stands on
//! its own, in the style of `reproduce --report` — rows are pairs, columns
//! the checker's verdict and the S2 of vfscale, `private` and the host,
//! coloured by whether each scales, with the conflicting sites listed —
//! and an SVG chart of every pair's three S2 figures beside the 0.9 x
//! private threshold.

use super::generate::Generated;
use super::measure::Scaling;
use super::outcome::{Commute, PairResult};
use crate::report::{chart_error, escape};
use crate::stats::Judgement;
use plotters::prelude::*;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The chart's file name inside the report directory.
const CHART: &str = "commute-s2.svg";

/// Writes `index.html` (and, when timed, the chart) into `dir`, created if
/// needed; returns the page's path.
pub fn write(run: &Commute, dir: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut html = String::new();
    head(&mut html, run);
    if run.summary.conditions.timed {
        chart(run, &dir.join(CHART))?;
        let _ = writeln!(html, "<p><img src=\"{CHART}\" alt=\"S2 of every pair: vfscale, private and host\"></p>");
    }
    matrix(&mut html, run);
    if let Some(generated) = &run.generated {
        generated_matrix(&mut html, generated);
    }
    html.push_str("</body></html>\n");
    let index = dir.join("index.html");
    std::fs::write(&index, html).map_err(|e| format!("cannot write {}: {e}", index.display()))?;
    Ok(index)
}

fn head(html: &mut String, run: &Commute) {
    let s = &run.summary;
    let m = &s.machine;
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>vfscale commute</title>\n<style>\
         body{{font-family:sans-serif;max-width:1200px;margin:auto;padding:1em;color:#222}}\
         table{{border-collapse:collapse;margin:.5em 0;font-size:90%}}td,th{{border:1px solid #ccc;padding:2px 6px;\
         vertical-align:top}}.num{{text-align:right}}.yes{{background:#d4f7d4}}.no{{background:#f7d4d4}}.maybe{{background:#f7f0c4}}\
         .none{{background:#eee}}.sites{{font-family:monospace;font-size:85%}}img{{max-width:100%}}\
         .why{{color:#555;font-size:85%}}\
         </style></head><body>\n<h1>vfscale commute: which commutative operations conflict, and which scale</h1>\n\
         <p>Machine: {} &middot; {} CPUs &middot; {} &middot; {}; load average {:.2} {:.2} {:.2} when the run began. {}</p>\n\
         <p>For each pair of operations that commute under POSIX, the <em>checker</em> runs A and B from one state \
         on two virtual CPUs (after warm-up, in both orders) and reports every cache line one wrote and the other \
         touched, through vfscale's audited atomics and locks. <em>S2</em> is the median throughput of two threads \
         (A on one, B on the other) over that of one thread doing A and B in turn; <em>private</em> gives each \
         thread a state of its own (the ceiling), <em>host</em> runs the same system calls on this machine's \
         kernel. A pair <em>scales</em> when its S2 is at least 0.9 &times; private's (for vfscale, judged \
         round by round: the median of each round's 2-thread throughput over private's); it does not scale when \
         the whole 95% interval is below 0.85 &times; private's, and is undecided in between.</p>\n\
         <p><strong>{}</strong></p>\n<ul>\n",
        escape(&m.kernel),
        m.cpus,
        escape(&m.cpu_model),
        escape(&m.arch),
        s.conditions.load_average[0],
        s.conditions.load_average[1],
        s.conditions.load_average[2],
        if s.conditions.timed {
            format!(
                "{} measured runs per cell after a warm-up{}, {}{}.",
                s.conditions.runs,
                if s.conditions.max_runs > s.conditions.runs {
                    format!(
                        " (up to {} for a pair left undecided, judged then on the 99% interval of all its rounds)",
                        s.conditions.max_runs
                    )
                } else {
                    String::new()
                },
                s.conditions.iterations.map_or_else(
                    || format!("each cell's 1-thread run calibrated to about {} ms", s.conditions.run_ms),
                    |n| format!("{n} operations per thread per run")
                ),
                if s.conditions.quick { " (--quick: noisier)" } else { "" }
            )
        } else {
            "Checker only (--check-only): no S2 measured.".to_string()
        },
        escape(&s.against.as_ref().map_or(s.line.clone(), |a| format!("{} ({})", s.line, a.line()))),
    );
    for g in &s.goals {
        let _ = writeln!(
            html,
            "<li class=\"{}\">{}: {} ({})</li>",
            match g.judgement {
                Judgement::Met => "yes",
                Judgement::NotMet => "no",
                Judgement::Inconclusive => "maybe",
            },
            g.judgement,
            escape(g.goal),
            escape(&g.detail)
        );
    }
    html.push_str("</ul>\n");
}

/// A table cell for an S2 figure, coloured by whether it scales.
fn s2_cell(s: Option<&Scaling>, missing: &str) -> String {
    match s {
        None => format!("<td class=\"none\">{}</td>", escape(missing)),
        Some(s) => {
            let class = match s.judgement {
                Some(Judgement::Met) => "yes",
                Some(Judgement::NotMet) => "no",
                Some(Judgement::Inconclusive) => "maybe",
                None => "none",
            };
            format!("<td class=\"num {class}\">{:.2}</td>", s.s2)
        }
    }
}

fn matrix(html: &mut String, run: &Commute) {
    html.push_str(
        "<table><tr><th>pair</th><th>checker</th><th>S2 vfscale</th><th>S2 private</th><th>S2 host</th>\
         <th>conflicting lines (sites)</th></tr>\n",
    );
    for r in &run.pairs {
        let verdict = if r.conflict_free {
            "<td class=\"yes\">conflict-free</td>".to_string()
        } else {
            format!("<td class=\"no\">{} lines</td>", r.conflicts.len())
        };
        let host_missing = r.host_skipped.as_deref().map_or("-".to_string(), |why| format!("skipped: {why}"));
        let _ = writeln!(
            html,
            "<tr><td><strong>{}</strong><br>{} &#8214; {}<br><span class=\"why\">{}</span></td>{verdict}{}{}{}<td>{}</td></tr>",
            escape(r.name),
            escape(r.ops[0]),
            escape(r.ops[1]),
            escape(r.commutes_because),
            s2_cell(r.vfscale.as_ref(), "-"),
            s2_cell(r.private.as_ref(), "-"),
            s2_cell(r.host.as_ref(), &host_missing),
            sites(r, run.summary.note(r)),
        );
    }
    html.push_str("</table>\n");
}

/// The generated matrix: its totals, the conflicting sites by how many
/// cases touched them, the known mechanisms, and every conflicting case.
fn generated_matrix(html: &mut String, g: &Generated) {
    let t = &g.totals;
    let (judged, judged_free) = t.judged();
    let _ = writeln!(
        html,
        "<h2>The generated matrix</h2>\n<p>{} cases generated, {} commutative on the host's tmpfs; vfscale \
         conflict-free on {} of {} generated commutative cases; {} of them exempt ({}), and of the other {judged}, \
         {judged_free} conflict-free.</p>",
        t.cases,
        t.commutative,
        t.conflict_free,
        t.commutative,
        t.exempt,
        escape(super::generate::EXEMPTION)
    );
    html.push_str("<table><tr><th>site</th><th class=\"num\">cases</th><th>for example</th></tr>\n");
    for group in &g.sites {
        let _ = writeln!(
            html,
            "<tr><td class=\"sites\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            escape(&group.site),
            group.cases,
            escape(&group.example)
        );
    }
    html.push_str("</table>\n<table><tr><th>known mechanism</th><th>why the line is shared</th></tr>\n");
    for (name, why) in &g.known_conflicts {
        let _ = writeln!(html, "<tr><td>{}</td><td class=\"why\">{}</td></tr>", escape(name), escape(why));
    }
    html.push_str("</table>\n<table><tr><th>conflicting case</th><th>mechanisms</th></tr>\n");
    for c in &g.conflicting {
        let mut mechanisms = c.mechanisms.join(", ");
        if c.exempt {
            mechanisms.push_str(" (exempt)");
        }
        if !c.unexplained.is_empty() {
            let _ = write!(mechanisms, "; not known: {}", c.unexplained.join(", "));
        }
        let _ = writeln!(html, "<tr><td>{}</td><td>{}</td></tr>", escape(&c.case), escape(&mechanisms));
    }
    html.push_str("</table>\n");
}

fn sites(r: &PairResult, note: Option<&str>) -> String {
    let mut out = String::new();
    if let Some(reason) = note {
        let _ = write!(out, "<span class=\"why\">known: {}</span>", escape(reason));
    }
    for (n, line) in r.conflicts.iter().enumerate() {
        let _ = write!(out, "<div class=\"sites\">{}. {}</div>", n + 1, escape(&line.join(", ")));
    }
    out
}

/// Every pair's S2 on vfscale, private and host as points on one row per
/// pair, with the pair's threshold (0.9 x private) as a tick.
fn chart(run: &Commute, path: &Path) -> Result<(), String> {
    let n = run.pairs.len();
    let figures = |r: &PairResult| [r.vfscale.as_ref(), r.private.as_ref(), r.host.as_ref()].map(|s| s.map(|s| s.s2));
    let hi = run.pairs.iter().flat_map(figures).flatten().fold(2.0, f64::max) * 1.05;
    let root = SVGBackend::new(path, (900, 80 + 22 * n as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(chart_error)?;
    let names: Vec<&str> = run.pairs.iter().map(|r| r.name).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption("S2 per pair (0.9 x private marked |)", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(200)
        .build_cartesian_2d(0.0..hi, -0.5..n as f64 - 0.5)
        .map_err(chart_error)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(n.max(1) * 2 + 1)
        .y_label_formatter(&|y| {
            let row = y.round();
            if (y - row).abs() < 1e-6 && row >= 0.0 {
                // Row 0 at the top.
                names.get(n - 1 - row as usize).map_or(String::new(), |s| s.to_string())
            } else {
                String::new()
            }
        })
        .x_desc("S2 (2-thread over 1-thread throughput)")
        .draw()
        .map_err(chart_error)?;
    let row = |i: usize| (n - 1 - i) as f64;
    let series = [
        ("vfscale", Palette99::pick(0).to_rgba()),
        ("private", BLACK.mix(0.6)),
        ("host", Palette99::pick(1).to_rgba()),
    ];
    for (k, (label, color)) in series.into_iter().enumerate() {
        let points: Vec<(f64, f64)> = run
            .pairs
            .iter()
            .enumerate()
            .filter_map(|(i, r)| figures(r)[k].map(|s2| (s2, row(i) + (k as f64 - 1.0) * 0.2)))
            .collect();
        chart
            .draw_series(points.into_iter().map(|p| Circle::new(p, 4, color.filled())))
            .map_err(chart_error)?
            .label(label)
            .legend(move |(x, y)| Circle::new((x + 8, y), 4, color.filled()));
    }
    let ticks = run.pairs.iter().enumerate().filter_map(|(i, r)| {
        let threshold = 0.9 * r.private.as_ref()?.s2;
        Some(PathElement::new(vec![(threshold, row(i) - 0.4), (threshold, row(i) + 0.4)], BLACK.stroke_width(1)))
    });
    chart.draw_series(ticks).map_err(chart_error)?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(chart_error)?;
    root.present().map_err(chart_error)
}
