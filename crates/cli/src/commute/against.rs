//! `commute --against FILE`: a run judged together with an earlier one.
//!
//! One run's intervals see the spread of its own rounds, not the machine
//! moving between runs, so a pair near the bar can be `not met` in one run
//! and undecided in the next. Against an earlier run's JSON, each pair's
//! scaling verdicts (vfscale's and the host's) become the verdict both runs
//! support: theirs where they agree, `inconclusive` where they differ. The
//! figures stay this run's.

use super::measure::Scaling;
use super::outcome::PairResult;
use crate::stats::Judgement;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The scaling verdicts of an earlier run, by pair.
#[derive(Debug, Clone)]
pub struct Previous {
    /// The file they came from, as given.
    pub file: String,
    /// Per pair: vfscale's and the host's judgement (absent when that
    /// side was not judged).
    judgements: BTreeMap<String, [Option<Judgement>; 2]>,
}

/// What the earlier run changed in this one.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Against {
    /// The earlier run's JSON.
    pub file: String,
    /// Pairs whose vfscale verdict differed there: inconclusive here.
    pub vfscale_differed: Vec<&'static str>,
    /// Pairs whose host verdict differed there: inconclusive here.
    pub host_differed: Vec<&'static str>,
    /// Pairs of this run the earlier one did not judge: their verdicts
    /// are this run's alone.
    pub not_there: Vec<&'static str>,
}

#[derive(Deserialize)]
struct SavedRun {
    pairs: Vec<SavedPair>,
}

#[derive(Deserialize)]
struct SavedPair {
    name: String,
    vfscale: Option<SavedScaling>,
    host: Option<SavedScaling>,
}

#[derive(Deserialize)]
struct SavedScaling {
    judgement: Option<Judgement>,
}

impl Previous {
    /// Reads the JSON of an earlier timed `vfscale commute --json` run.
    pub fn load(path: &Path) -> Result<Previous, String> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {file}: {e}"))?;
        Previous::from_json(file, &text)
    }

    /// The verdicts of `text`, the JSON saved in `file`.
    pub fn from_json(file: String, text: &str) -> Result<Previous, String> {
        let run: SavedRun =
            serde_json::from_str(text).map_err(|e| format!("{file} is not the JSON of vfscale commute ({e})"))?;
        let judgement = |s: &Option<SavedScaling>| s.as_ref().and_then(|s| s.judgement);
        let judgements: BTreeMap<_, _> =
            run.pairs.into_iter().map(|p| (p.name, [judgement(&p.vfscale), judgement(&p.host)])).collect();
        if judgements.values().all(|[vfscale, _]| vfscale.is_none()) {
            return Err(format!("{file} has no scaling verdicts (a --check-only run?)"));
        }
        Ok(Previous { file, judgements })
    }

    /// Judges `results` together with this earlier run.
    pub fn apply(&self, results: &mut [PairResult]) -> Against {
        let mut against = Against { file: self.file.clone(), ..Against::default() };
        for result in results.iter_mut() {
            let Some([vfscale, host]) = self.judgements.get(result.name) else {
                against.not_there.push(result.name);
                continue;
            };
            if agree(result.vfscale.as_mut(), *vfscale) {
                against.vfscale_differed.push(result.name);
            }
            if agree(result.host.as_mut(), *host) {
                against.host_differed.push(result.name);
            }
        }
        against
    }
}

impl Against {
    /// A one-line account for the table and the report.
    pub fn line(&self) -> String {
        let mut line = format!("against {}: ", self.file);
        let sides = [("vfscale", &self.vfscale_differed), ("host", &self.host_differed)];
        let differed: Vec<String> = sides
            .iter()
            .filter(|(_, names)| !names.is_empty())
            .map(|(side, names)| format!("{side} {} ({})", names.len(), names.join(", ")))
            .collect();
        if differed.is_empty() {
            line.push_str("every pair judged as there");
        } else {
            let _ = write!(line, "judged otherwise there, inconclusive here: {}", differed.join("; "));
        }
        if !self.not_there.is_empty() {
            let _ = write!(line, "; not there (judged on this run alone): {}", self.not_there.join(", "));
        }
        line
    }
}

/// Makes `scaling`'s verdict the one it and `earlier` agree on, keeping
/// its own in `alone`; whether the two differed. A side judged in one run
/// only keeps its verdict.
fn agree(scaling: Option<&mut Scaling>, earlier: Option<Judgement>) -> bool {
    let Some(scaling) = scaling else { return false };
    let (Some(now), Some(earlier)) = (scaling.judgement, earlier) else { return false };
    let both = now.agreed(earlier);
    scaling.alone = Some(now);
    scaling.judgement = Some(both);
    scaling.scales = Some(both == Judgement::Met);
    now != earlier
}
