//! `reproduce --report DIR`: an HTML page with SVG charts that stands on its
//! own — a reader who never saw the terminal output finds, per experiment,
//! what the seed claimed, the machine, every verdict, every cell, and two
//! charts per case: throughput against threads for each variant (host
//! included, bootstrap 95% intervals as error bars, log scales, and the
//! `private` ceiling as a dashed line), and the per-op time of every thread
//! of every run at the largest thread count.
//!
//! The charts are drawn with plotters' SVG backend and its built-in font
//! metrics, so no font files or network are needed to write or view them.

use crate::bench::{efficiency_line, human, more_rounds_line, CellReport};
use crate::reproduce::{verdict_line, CaseResult, ExperimentResult, Reproduction};
use crate::stats::Verdict;
use crate::workloads::PRIVATE;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Writes `index.html` and the charts into `dir` (created if needed) and
/// returns the page's path.
pub fn write(repro: &Reproduction, dir: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut html = String::new();
    head(&mut html, repro);
    for experiment in &repro.experiments {
        section(&mut html, repro, experiment, dir)?;
    }
    html.push_str("</body></html>\n");
    let index = dir.join("index.html");
    std::fs::write(&index, html).map_err(|e| format!("cannot write {}: {e}", index.display()))?;
    Ok(index)
}

/// `text` with the characters HTML gives meaning to escaped.
pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn head(html: &mut String, repro: &Reproduction) {
    let m = &repro.machine;
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>vfscale reproduce</title>\n<style>\
         body{{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em;color:#222}}\
         table{{border-collapse:collapse;margin:.5em 0;font-size:90%}}td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}}\
         td:first-child,th:first-child{{text-align:left}}.faster{{background:#d4f7d4}}.slower{{background:#f7d4d4}}\
         .same{{background:#eee}}img{{max-width:100%}}.note{{color:#835}}code{{background:#f4f4f4}}\
         </style></head><body>\n<h1>vfscale: the seed experiments, reproduced</h1>\n\
         <p>Machine: {} &middot; {} CPUs &middot; {} &middot; {}. vfscale {}; {} measured runs per cell after a warm-up{}; \
         threads {}{}.</p>\n<p>{}</p>\n\
         <p>Every cell runs its threads behind a barrier; throughput is all threads' operations per second. \
         Verdicts compare the throughput of the \"after\" design with the \"before\" design at the same thread count: \
         ratio of means with a bootstrap 95% interval, and a two-sided Mann&ndash;Whitney U test at 95% \
         (&ldquo;no significant difference&rdquo; is a result). <em>host</em> is the same workload on this machine's \
         own Linux kernel. <em>private</em> is the machine's ceiling: the first design's work with nothing shared between threads (each its own instance), run in the same rounds; the dashed line on the throughput charts. A design's <em>efficiency</em> at T threads is its speedup S<sub>T</sub> (throughput at T over throughput at 1) over the speedup of private at T: 1 is as well as unshared work scales here.</p>\n",
        escape(&m.kernel),
        m.cpus,
        escape(&m.cpu_model),
        escape(&m.arch),
        repro.vfscale_version,
        repro.runs,
        crate::bench::up_to(repro.runs, repro.max_runs),
        repro.threads.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", "),
        if repro.quick { " (--quick: fewer runs and iterations, noisier)" } else { "" },
        escape(&repro.calibration.line()),
    );
}

fn section(html: &mut String, repro: &Reproduction, e: &ExperimentResult, dir: &Path) -> Result<(), String> {
    let _ = write!(
        html,
        "<h2 id=\"{}\">{} (seed {})</h2>\n<p>{}</p>\n<p>The seed reported: {}</p>\n",
        e.name,
        e.name,
        e.seed,
        escape(e.title),
        escape(e.claim)
    );
    for note in &e.notes {
        let _ = writeln!(html, "<p class=\"note\">Note: {}</p>", escape(note));
    }
    for (i, case) in e.cases.iter().enumerate().filter(|(_, c)| !c.cells.is_empty()) {
        let mut title = case.workload.to_string();
        if let Some(w) = case.vfs_workload.filter(|w| *w != case.workload) {
            let _ = write!(title, " (vfscale stand-in: {w})");
        }
        if let Some(h) = case.hold_us {
            let _ = write!(title, ", hold {h} us");
        }
        let _ = writeln!(html, "<h3>{}</h3>", escape(&title));
        verdicts(html, case);
        let judged = [efficiency_line(&case.cells), more_rounds_line(&case.cells, repro.runs, repro.max_runs)];
        for line in judged.into_iter().flatten() {
            let _ = writeln!(html, "<p>{}</p>", escape(&line));
        }
        let stem = format!("{}-{}", e.name, i);
        let throughput = format!("{stem}-throughput.svg");
        throughput_chart(&case.cells, &title, &dir.join(&throughput))?;
        let per_op = format!("{stem}-per-op.svg");
        per_op_chart(&case.cells, &title, &dir.join(&per_op))?;
        let _ = writeln!(
            html,
            "<p><img src=\"{throughput}\" alt=\"throughput against threads, {t}\"> \
             <img src=\"{per_op}\" alt=\"per-op time per thread, {t}\"></p>",
            t = escape(&title)
        );
        cells(html, &case.cells);
    }
    Ok(())
}

fn verdicts(html: &mut String, case: &CaseResult) {
    if case.verdicts.is_empty() {
        return;
    }
    html.push_str("<table><tr><th>verdict (after vs before)</th><th>ratio</th><th>95% CI</th><th>p</th></tr>\n");
    for v in &case.verdicts {
        let c = &v.comparison;
        let class = match c.verdict {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::NoSignificantDifference => "same",
        };
        let _ = writeln!(
            html,
            "<tr class=\"{class}\"><td>{} {}</td><td>{:.2}x</td><td>{:.2} &ndash; {:.2}</td><td>{:.4}</td></tr>",
            escape(&v.workload),
            escape(&verdict_line(v)),
            c.ratio,
            c.ratio_ci95[0],
            c.ratio_ci95[1],
            c.rank_test.p_value
        );
    }
    html.push_str("</table>\n");
}

fn cells(html: &mut String, cells: &[CellReport]) {
    html.push_str(
        "<table><tr><th>workload / variant</th><th>threads</th><th>median ops/s</th><th>mean 95% CI</th>\
         <th>sigma</th><th>min</th><th>max</th><th>us/op (thread)</th><th>S</th><th>efficiency</th>\
         <th>fairness min/max</th><th>user s</th><th>sys s</th></tr>\n",
    );
    for c in cells {
        let o = &c.stats.ops_per_sec;
        let _ = writeln!(
            html,
            "<tr><td>{} {}</td><td>{}</td><td>{}</td><td>{} &ndash; {}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{:.3}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.3}</td><td>{:.3}</td></tr>",
            escape(c.workload),
            escape(c.variant),
            c.threads,
            human(o.median),
            human(o.ci95[0]),
            human(o.ci95[1]),
            human(o.sigma),
            human(o.min),
            human(o.max),
            c.stats.per_op_ns.median / 1e3,
            c.speedup.map_or("-".into(), |s| format!("{s:.2}")),
            c.efficiency.map_or("-".into(), |e| format!("{}{e:.2}", c.loose_mark())),
            c.stats.fairness.min_over_max,
            c.stats.cpu_user_s.median,
            c.stats.cpu_system_s.median
        );
    }
    html.push_str("</table>\n");
    for c in cells.iter().filter(|c| c.threads == 1) {
        if let Some(note) = &c.note {
            let _ =
                writeln!(html, "<p class=\"note\">{} {}: {}</p>", escape(c.workload), escape(c.variant), escape(note));
        }
    }
}

/// The variants of `cells` in order of first appearance, as "workload variant".
fn series(cells: &[CellReport]) -> Vec<(&'static str, &'static str)> {
    let mut names: Vec<(&str, &str)> = Vec::new();
    for c in cells {
        if !names.contains(&(c.workload, c.variant)) {
            names.push((c.workload, c.variant));
        }
    }
    names
}

/// A plotters error as the one line the CLI reports.
pub(crate) fn chart_error(e: impl std::fmt::Display) -> String {
    format!("drawing a chart: {e}")
}

fn throughput_chart(cells: &[CellReport], title: &str, path: &Path) -> Result<(), String> {
    let max_threads = cells.iter().map(|c| c.threads).max().unwrap_or(1) as f64;
    let lo =
        cells.iter().map(|c| c.stats.ops_per_sec.ci95[0].min(c.stats.ops_per_sec.median)).fold(f64::INFINITY, f64::min);
    let hi = cells.iter().map(|c| c.stats.ops_per_sec.ci95[1].max(c.stats.ops_per_sec.median)).fold(0.0, f64::max);
    let root = SVGBackend::new(path, (640, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(chart_error)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{title}: throughput"), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(-0.3f64..max_threads.log2() + 0.3, ((lo / 2.0).max(1e-3)..hi * 2.0).log_scale())
        .map_err(chart_error)?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .x_desc("threads (log scale)")
        .y_desc("ops/s, all threads")
        .x_labels(12)
        .x_label_formatter(&|x| {
            // The axis is log2(threads): label the powers of two.
            let r = x.round();
            if (x - r).abs() < 1e-6 && r >= 0.0 {
                format!("{}", 1u64 << r as u32)
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|y| human(*y))
        .draw()
        .map_err(chart_error)?;
    let designs = series(cells).into_iter().filter(|&(_, variant)| variant != PRIVATE);
    let ceiling = series(cells).into_iter().filter(|&(_, variant)| variant == PRIVATE);
    for (i, (workload, variant)) in designs.enumerate().chain(ceiling.map(|s| (usize::MAX, s))) {
        let is_ceiling = i == usize::MAX;
        let color = if is_ceiling { BLACK.mix(0.75) } else { Palette99::pick(i).to_rgba() };
        let mine: Vec<&CellReport> = cells.iter().filter(|c| c.workload == workload && c.variant == variant).collect();
        let points: Vec<(f64, f64)> =
            mine.iter().map(|c| ((c.threads as f64).log2(), c.stats.ops_per_sec.median)).collect();
        if is_ceiling {
            // The ceiling: the first design's work, nothing shared.
            chart
                .draw_series(DashedLineSeries::new(points.clone(), 8, 5, color.stroke_width(2)))
                .map_err(chart_error)?
                .label(format!("{workload} {variant} (ceiling)"))
                .legend(move |(x, y)| DashedPathElement::new(vec![(x, y), (x + 16, y)], 5, 3, color.stroke_width(2)));
        } else {
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                .map_err(chart_error)?
                .label(format!("{workload} {variant}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
        }
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled()))).map_err(chart_error)?;
        chart
            .draw_series(mine.iter().map(|c| {
                let o = &c.stats.ops_per_sec;
                ErrorBar::new_vertical(
                    (c.threads as f64).log2(),
                    o.ci95[0],
                    o.median,
                    o.ci95[1],
                    color.stroke_width(1),
                    8,
                )
            }))
            .map_err(chart_error)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(chart_error)?;
    root.present().map_err(chart_error)
}

fn per_op_chart(cells: &[CellReport], title: &str, path: &Path) -> Result<(), String> {
    let max_threads = cells.iter().map(|c| c.threads).max().unwrap_or(1);
    let widest: Vec<&CellReport> = cells.iter().filter(|c| c.threads == max_threads).collect();
    let values = || widest.iter().flat_map(|c| c.stats.thread_per_op_us.iter().copied());
    let lo = values().fold(f64::INFINITY, f64::min).max(1e-4);
    let hi = values().fold(0.0, f64::max).max(lo * 1.01);
    let n = widest.len().max(1);
    let root = SVGBackend::new(path, (640, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(chart_error)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{title}: us per op, each thread of each run, {max_threads} threads"), ("sans-serif", 15))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, (lo / 1.5..hi * 1.5).log_scale())
        .map_err(chart_error)?;
    let names: Vec<String> = widest.iter().map(|c| c.variant.to_string()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc("microseconds per op (one thread)")
        .draw()
        .map_err(chart_error)?;
    for (i, c) in widest.iter().enumerate() {
        // The colours of the throughput chart: private grey, the others in
        // order without it.
        let designs_before = widest[..i].iter().filter(|c| c.variant != PRIVATE).count();
        let color = if c.variant == PRIVATE { BLACK.mix(0.75) } else { Palette99::pick(designs_before).to_rgba() };
        // Spread the points across the column so equal values stay visible.
        let count = c.stats.thread_per_op_us.len().max(1) as f64;
        let points = c.stats.thread_per_op_us.iter().enumerate().map(|(k, &v)| {
            let offset = (k as f64 / count - 0.5) * 0.6;
            Circle::new((i as f64 + offset, v), 2, color.mix(0.6).filled())
        });
        chart
            .draw_series(points)
            .map_err(chart_error)?
            .label(format!("{} {}", c.workload, c.variant))
            .legend(move |(x, y)| Circle::new((x + 8, y), 3, color.filled()));
        let median = crate::stats::median(&c.stats.thread_per_op_us).unwrap_or(0.0);
        chart
            .draw_series(LineSeries::new(
                vec![(i as f64 - 0.35, median), (i as f64 + 0.35, median)],
                BLACK.stroke_width(2),
            ))
            .map_err(chart_error)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(chart_error)?;
    root.present().map_err(chart_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reproduce::{self, Case, Experiment, Format, Options};

    #[test]
    fn report_has_page_charts_and_verdicts() {
        let experiment = Experiment {
            name: "t",
            seed: "000",
            title: "a <title>",
            claim: "c",
            format: Format::Table,
            cases: &[reproduce::Case { host: false, ..CASE }],
        };
        let options = Options { quick: true, threads: vec![1, 2], max_runs: None };
        let result = reproduce::run(&experiment, &options, &mut |_, _| {});
        let repro = Reproduction {
            vfscale_version: "test",
            machine: crate::machine::Machine::this(),
            quick: true,
            runs: options.runs(),
            max_runs: options.max_runs(),
            threads: options.threads.clone(),
            calibration: crate::calibration::Calibration::measure(&[1, 2], 1, std::time::Duration::from_millis(1)),
            experiments: vec![result],
        };
        let dir = std::env::temp_dir().join(format!("vfscale-report-test-{}", std::process::id()));
        let index = write(&repro, &dir).unwrap();
        let page = std::fs::read_to_string(&index).unwrap();
        assert!(page.contains("a &lt;title&gt;"), "titles are escaped");
        assert!(page.contains("<p>calibration ("), "the page gives the calibration");
        assert!(page.contains("t-0-throughput.svg") && page.contains("t-0-per-op.svg"));
        assert!(page.contains("lockref vs mutex"));
        for chart in ["t-0-throughput.svg", "t-0-per-op.svg"] {
            let svg = std::fs::read_to_string(dir.join(chart)).unwrap();
            assert!(svg.starts_with("<svg") && svg.contains("lockref"), "{chart}");
        }
        let throughput = std::fs::read_to_string(dir.join("t-0-throughput.svg")).unwrap();
        assert!(throughput.contains("prim-lockref private (ceiling)"), "the ceiling is drawn and named");
        assert!(
            page.contains("efficiency (S / S private, &gt;= 0.9 scales; ~ figure inconclusive): x2 lockref "),
            "the page gives each design's efficiency"
        );
        assert!(!page.contains("private vs") && !page.contains("vs private"), "private is no contender");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    const CASE: Case = Case { workload: "prim-lockref", stand_in: None, hold_us: None, host: true, pairs: &[] };
}
