//! Statistics of repeated measurements: one module used by every workload,
//! host driver and report, so every table, JSON object and verdict means the
//! same thing.
//!
//! A cell's runs are reduced to a [`Summary`] (median, mean, sample variance,
//! sigma, min, max, and a bootstrap 95% confidence interval of the mean). Two
//! cells are compared with [`compare`]: the ratio of their mean throughputs
//! with a bootstrap interval, and a verdict from a two-sided Mann–Whitney U
//! test at the 5% level — "no significant difference" is a result, not a
//! failure (seed 004's lglock numbers were exactly that).
//!
//! Resampling uses a fixed seed, so the same runs always give the same
//! intervals; the figures are estimates from few runs, not proofs.
//!
//! ```
//! let before = [10.0, 11.0, 10.5, 10.2];
//! let after = [20.0, 21.0, 19.5, 20.4];
//! let c = compare(&before, &after).unwrap();
//! assert_eq!(c.verdict, Verdict::Faster);
//! ```

use serde::{Deserialize, Serialize};

/// Resamples drawn for every bootstrap interval.
pub const RESAMPLES: usize = 2000;
/// Seed of every bootstrap, so a report is reproducible from its samples.
pub const SEED: u64 = 0x5eed_0000_0000_0004;
/// Two-sided significance level of the verdicts.
pub const ALPHA: f64 = 0.05;

/// Median, mean, sample variance (n - 1), standard deviation, min, max and a
/// 95% bootstrap interval of the mean of a set of measurements; the first six
/// are what lockperf reported in seed 004.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Middle value (mean of the two middle values for an even count).
    pub median: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample variance, divided by n - 1 (0 for a single value).
    pub variance: f64,
    /// Square root of the variance.
    pub sigma: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Percentile-bootstrap 95% confidence interval of the mean
    /// ([`RESAMPLES`] resamples, seed [`SEED`]); a single value's interval
    /// is that value.
    pub ci95: [f64; 2],
}

impl Summary {
    /// Summarises `values`; `None` when there are none or any is not finite.
    pub fn of(values: &[f64]) -> Option<Self> {
        if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let mean = mean(&sorted);
        let variance =
            if n > 1 { sorted.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64 } else { 0.0 };
        Some(Self {
            median: median_of_sorted(&sorted),
            mean,
            variance,
            sigma: variance.sqrt(),
            min: sorted[0],
            max: sorted[n - 1],
            ci95: bootstrap_ci(values, RESAMPLES, SEED, mean_of),
        })
    }
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

fn mean_of(values: &[f64]) -> f64 {
    mean(values)
}

fn median_of_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// The median of unsorted values; `None` when there are none.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(median_of_sorted(&sorted))
}

/// SplitMix64: a tiny, well-mixed generator; enough for resampling indices.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator whose sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform index below `n` (multiply-high; the bias is below 2^-32 for
    /// the sample sizes used here).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

/// The `q` quantile (0..=1) of sorted values, linearly interpolated.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Percentile-bootstrap 95% interval of `statistic` over `values`: draw
/// `resamples` samples of the same size with replacement, and take the 2.5%
/// and 97.5% quantiles of the statistic. Panics on an empty sample.
pub fn bootstrap_ci(values: &[f64], resamples: usize, seed: u64, statistic: impl Fn(&[f64]) -> f64) -> [f64; 2] {
    bootstrap_interval(values, resamples, seed, 0.95, statistic)
}

/// As [`bootstrap_ci`], at confidence `level` (0.99: the 0.5% and 99.5%
/// quantiles).
pub fn bootstrap_interval(
    values: &[f64],
    resamples: usize,
    seed: u64,
    level: f64,
    statistic: impl Fn(&[f64]) -> f64,
) -> [f64; 2] {
    assert!(!values.is_empty() && resamples > 0, "bootstrap of an empty sample");
    assert!(level > 0.0 && level < 1.0, "a confidence level is a share");
    if values.len() == 1 {
        let v = statistic(values);
        return [v, v];
    }
    let mut rng = SplitMix64::new(seed);
    let mut sample = vec![0.0; values.len()];
    let mut stats: Vec<f64> = (0..resamples)
        .map(|_| {
            for slot in sample.iter_mut() {
                *slot = values[rng.below(values.len())];
            }
            statistic(&sample)
        })
        .collect();
    stats.sort_by(f64::total_cmp);
    let tail = (1.0 - level) / 2.0;
    [quantile(&stats, tail), quantile(&stats, 1.0 - tail)]
}

/// Percentile-bootstrap 95% interval of `mean(after) / mean(before)`,
/// resampling the two samples independently.
pub fn bootstrap_ratio_ci(before: &[f64], after: &[f64], resamples: usize, seed: u64) -> [f64; 2] {
    assert!(!before.is_empty() && !after.is_empty() && resamples > 0, "bootstrap of an empty sample");
    let mut rng = SplitMix64::new(seed);
    let mut draw = |values: &[f64]| (0..values.len()).map(|_| values[rng.below(values.len())]).sum::<f64>();
    let mut ratios: Vec<f64> = (0..resamples)
        .map(|_| {
            let b = draw(before) / before.len() as f64;
            let a = draw(after) / after.len() as f64;
            a / b
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    [quantile(&ratios, 0.025), quantile(&ratios, 0.975)]
}

/// A ratio estimated round by round: in every round each cell it needs
/// ran once, close in time, so the ratio of one round cancels the drift
/// of a shared machine between rounds. The estimate is the median of the
/// rounds' ratios, with a percentile-bootstrap 95% interval of that median
/// over the rounds ([`RESAMPLES`] resamples, seed [`SEED`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RoundRatio {
    /// Median over rounds.
    pub median: f64,
    /// 95% interval of the median.
    pub ci95: [f64; 2],
}

impl RoundRatio {
    /// The median and interval of per-round values; `None` when there are
    /// none or any is not finite.
    pub fn of(per_round: &[f64]) -> Option<Self> {
        let ci95 = Self::interval(per_round, 0.95)?;
        Some(Self { median: median(per_round)?, ci95 })
    }

    /// The bootstrap interval of the median of `per_round` at confidence
    /// `level`; `None` when there are none or any is not finite.
    fn interval(per_round: &[f64], level: f64) -> Option<[f64; 2]> {
        if per_round.is_empty() || per_round.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let median_of = |values: &[f64]| median(values).expect("a resample is never empty");
        Some(bootstrap_interval(per_round, RESAMPLES, SEED, level, median_of))
    }

    /// `ratio(round)` for every round that all of `cells` ran (each cell's
    /// samples are in round order), reduced as [`RoundRatio::of`].
    pub fn of_rounds(cells: &[&[f64]], ratio: impl Fn(&[f64]) -> f64) -> Option<Self> {
        Self::of(&per_round(cells, ratio)?)
    }

    /// The interval of the median of the same per-round values at
    /// confidence `level`; `None` as for [`RoundRatio::of_rounds`].
    pub fn interval_of_rounds(cells: &[&[f64]], ratio: impl Fn(&[f64]) -> f64, level: f64) -> Option<[f64; 2]> {
        Self::interval(&per_round(cells, ratio)?, level)
    }

    /// Whether the figure itself is pinned down: its whole 95% interval
    /// lies within `tolerance` of the median, so another run on the same
    /// machine should give it again to within twice that (drift of the
    /// machine between the runs aside, which one run's rounds cannot see).
    pub fn pinned_within(&self, tolerance: f64) -> bool {
        self.ci95[0] >= self.median - tolerance && self.ci95[1] <= self.median + tolerance
    }
}

/// `ratio(round)` for every round that all of `cells` ran.
fn per_round(cells: &[&[f64]], ratio: impl Fn(&[f64]) -> f64) -> Option<Vec<f64>> {
    let rounds = cells.iter().map(|c| c.len()).min()?;
    Some(
        (0..rounds)
            .map(|r| {
                let round: Vec<f64> = cells.iter().map(|c| c[r]).collect();
                ratio(&round)
            })
            .collect(),
    )
}

impl std::fmt::Display for RoundRatio {
    /// `0.98 [0.95, 1.01]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.2} [{:.2}, {:.2}]", self.median, self.ci95[0], self.ci95[1])
    }
}

/// Which look at a set of rounds a judgement is: the first, on the rounds
/// a run was planned with, or one after more rounds, which judges on the
/// wider [`MORE_ROUNDS_LEVEL`] interval, so that k looks call a figure at
/// the bar met at most 2.5% + (k - 1) x 0.5% of the time (nominal levels,
/// Bonferroni) instead of 2.5% at every look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    /// The first look.
    First,
    /// A look after more rounds.
    More,
}

impl Look {
    /// The interval this look judges on: the first, `estimate`'s own 95%
    /// one; a later one, the [`MORE_ROUNDS_LEVEL`] interval of the median
    /// of the same rounds' `ratio`s over `cells`.
    pub fn interval(
        self,
        estimate: Option<RoundRatio>,
        cells: &[&[f64]],
        ratio: impl Fn(&[f64]) -> f64,
    ) -> Option<[f64; 2]> {
        match self {
            Look::First => estimate.map(|e| e.ci95),
            Look::More => RoundRatio::interval_of_rounds(cells, ratio, MORE_ROUNDS_LEVEL),
        }
    }
}

/// The confidence of the interval a look after more rounds judges on.
pub const MORE_ROUNDS_LEVEL: f64 = 0.99;

/// A bar a measured figure must clear to meet a goal.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// At most this.
    AtMost(f64),
    /// At least this.
    AtLeast(f64),
}

impl Bound {
    /// Whether `value` clears the bar.
    pub fn holds(self, value: f64) -> bool {
        match self {
            Bound::AtMost(b) => value <= b,
            Bound::AtLeast(b) => value >= b,
        }
    }

    /// What the data say: [`Judgement::Met`] when the whole interval (95%,
    /// or 99% at a later [`Look`]) clears the bar, [`Judgement::NotMet`]
    /// when none of it does, and [`Judgement::Inconclusive`] when it
    /// straddles the bar.
    pub fn judge(self, interval: [f64; 2]) -> Judgement {
        match (self.holds(interval[0]), self.holds(interval[1])) {
            (true, true) => Judgement::Met,
            (false, false) => Judgement::NotMet,
            _ => Judgement::Inconclusive,
        }
    }

    /// Like [`Bound::judge`], but [`Judgement::NotMet`] only when the whole
    /// interval misses the bar by more than `margin`: an interval that
    /// misses it by less is inconclusive. One run's interval cannot see the
    /// machine move between runs; the margin keeps a figure that another
    /// run could put a little higher from being called a failure.
    pub fn judge_clear_of(self, ci95: [f64; 2], margin: f64) -> Judgement {
        let eased = match self {
            Bound::AtMost(b) => Bound::AtMost(b + margin),
            Bound::AtLeast(b) => Bound::AtLeast(b - margin),
        };
        match (self.judge(ci95), eased.judge(ci95)) {
            (Judgement::Met, _) => Judgement::Met,
            (_, Judgement::NotMet) => Judgement::NotMet,
            _ => Judgement::Inconclusive,
        }
    }

    /// `>= 0.9`, `<= 1.5x` with `unit` "x".
    pub fn show(self, unit: &str) -> String {
        match self {
            Bound::AtMost(b) => format!("<= {b}{unit}"),
            Bound::AtLeast(b) => format!(">= {b}{unit}"),
        }
    }
}

/// A goal checked against an interval, never against a point alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Judgement {
    /// The whole interval clears the bar.
    Met,
    /// No part of the interval clears the bar.
    NotMet,
    /// The interval straddles the bar: the data cannot decide.
    Inconclusive,
}

impl Judgement {
    /// How many of `judgements` are met, not met and inconclusive, in
    /// that order.
    pub fn tally(judgements: impl IntoIterator<Item = Judgement>) -> [usize; 3] {
        let mut counts = [0; 3];
        for j in judgements {
            counts[j as usize] += 1;
        }
        counts
    }

    /// The verdict two runs support together: theirs where they agree,
    /// inconclusive where they differ.
    pub fn agreed(self, other: Judgement) -> Judgement {
        if self == other {
            self
        } else {
            Judgement::Inconclusive
        }
    }
}

impl std::fmt::Display for Judgement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Judgement::Met => "met",
            Judgement::NotMet => "not met",
            Judgement::Inconclusive => "inconclusive",
        })
    }
}

/// The outcome of a two-sided Mann–Whitney U test of sample `a` against `b`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RankTest {
    /// U of the first sample: pairs (x in a, y in b) with x > y, ties
    /// counting one half.
    pub u: f64,
    /// Two-sided p-value.
    pub p_value: f64,
    /// Whether `p_value` is the exact permutation probability (no ties, at
    /// most [`EXACT_MAX`] values in all) or the normal approximation with
    /// tie and continuity corrections.
    pub exact: bool,
}

/// Largest combined sample size for which the exact distribution is used.
pub const EXACT_MAX: usize = 40;

/// Mann–Whitney U test; `None` when either sample is empty or holds a
/// non-finite value.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<RankTest> {
    if a.is_empty() || b.is_empty() || a.iter().chain(b).any(|v| !v.is_finite()) {
        return None;
    }
    let (m, n) = (a.len(), b.len());
    let mut all: Vec<(f64, bool)> = a.iter().map(|&v| (v, true)).chain(b.iter().map(|&v| (v, false))).collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    // Average ranks over runs of ties; collect tie sizes for the correction.
    let mut rank_sum_a = 0.0;
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < all.len() {
        let j = (i..all.len()).find(|&j| all[j].0 != all[i].0).unwrap_or(all.len());
        let average_rank = (i + 1 + j) as f64 / 2.0;
        rank_sum_a += all[i..j].iter().filter(|(_, in_a)| *in_a).count() as f64 * average_rank;
        let t = (j - i) as f64;
        tie_term += t * t * t - t;
        i = j;
    }
    let u = rank_sum_a - (m * (m + 1)) as f64 / 2.0;
    let total = m + n;
    if tie_term == 0.0 && total <= EXACT_MAX {
        return Some(RankTest { u, p_value: exact_p(m, n, u), exact: true });
    }
    let mu = (m * n) as f64 / 2.0;
    let variance = (m * n) as f64 / 12.0 * ((total + 1) as f64 - tie_term / (total * (total - 1)) as f64);
    if variance <= 0.0 {
        return Some(RankTest { u, p_value: 1.0, exact: false });
    }
    let distance = ((u - mu).abs() - 0.5).max(0.0);
    let z = distance / variance.sqrt();
    Some(RankTest { u, p_value: erfc(z / std::f64::consts::SQRT_2).min(1.0), exact: false })
}

/// Exact two-sided p of U = `u` for samples of `m` and `n` distinct values:
/// twice the smaller tail of the permutation distribution of U.
fn exact_p(m: usize, n: usize, u: f64) -> f64 {
    // counts[j][k]: ways to reach U = k with i values of a and j of b, for
    // the current i; the recurrence splits on whether the largest value
    // belongs to a (adds j to U) or to b.
    let max_u = m * n;
    let mut counts: Vec<Vec<f64>> = (0..=n).map(|_| vec![1.0]).collect();
    for i in 1..=m {
        let mut next: Vec<Vec<f64>> = Vec::with_capacity(n + 1);
        next.push(vec![1.0]);
        for j in 1..=n {
            let mut row = vec![0.0; i * j + 1];
            for (k, &c) in counts[j].iter().enumerate() {
                row[k + j] += c;
            }
            for (k, &c) in next[j - 1].iter().enumerate() {
                row[k] += c;
            }
            next.push(row);
        }
        counts = next;
    }
    let dist = &counts[n];
    debug_assert_eq!(dist.len(), max_u + 1, "U ranges over 0..=m*n");
    let total: f64 = dist.iter().sum();
    let below: f64 = dist.iter().enumerate().filter(|(k, _)| *k as f64 <= u).map(|(_, c)| c).sum();
    let above: f64 = dist.iter().enumerate().filter(|(k, _)| *k as f64 >= u).map(|(_, c)| c).sum();
    (2.0 * below.min(above) / total).min(1.0)
}

/// Complementary error function (Numerical Recipes' Chebyshev fit,
/// fractional error below 1.2e-7).
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// What a before/after comparison concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    /// "after" has the higher throughput, significantly.
    #[serde(rename = "faster")]
    Faster,
    /// "after" has the lower throughput, significantly.
    #[serde(rename = "slower")]
    Slower,
    /// The rank test cannot tell the two apart at 95%.
    #[serde(rename = "no significant difference")]
    NoSignificantDifference,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::NoSignificantDifference => "no significant difference",
        })
    }
}

/// Throughput of "after" against "before".
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// mean(after) / mean(before).
    pub ratio: f64,
    /// Bootstrap 95% interval of the ratio.
    pub ratio_ci95: [f64; 2],
    /// Mann–Whitney U of "after" against "before" and its p-value.
    pub rank_test: RankTest,
    /// Faster, slower, or no significant difference, at [`ALPHA`].
    pub verdict: Verdict,
}

/// Compares throughput samples (higher is better) of "before" and "after";
/// `None` when either is empty or not finite, or "before" averages zero.
pub fn compare(before: &[f64], after: &[f64]) -> Option<Comparison> {
    let rank_test = mann_whitney(after, before)?;
    let mean_before = mean(before);
    if mean_before == 0.0 {
        return None;
    }
    let half = (after.len() * before.len()) as f64 / 2.0;
    let verdict = if rank_test.p_value >= ALPHA {
        Verdict::NoSignificantDifference
    } else if rank_test.u > half {
        Verdict::Faster
    } else {
        Verdict::Slower
    };
    Some(Comparison {
        ratio: mean(after) / mean_before,
        ratio_ci95: bootstrap_ratio_ci(before, after, RESAMPLES, SEED),
        rank_test,
        verdict,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_ratios_cancel_drift_between_rounds() {
        // Every cell halves in the last two rounds; each round's ratio is 2.
        let two = [20.0, 20.0, 20.0, 10.0, 10.0];
        let one = [10.0, 10.0, 10.0, 5.0, 5.0];
        let r = RoundRatio::of_rounds(&[&two, &one], |c| c[0] / c[1]).unwrap();
        assert_eq!((r.median, r.ci95), (2.0, [2.0, 2.0]));
        assert_eq!(r.to_string(), "2.00 [2.00, 2.00]");
        let short = RoundRatio::of_rounds(&[&two[..2], &one], |c| c[0] / c[1]).unwrap();
        assert_eq!(short.ci95, [2.0, 2.0], "only the rounds both cells ran");
        assert!(RoundRatio::of_rounds(&[&[], &one], |c| c[0] / c[1]).is_none());
        assert!(RoundRatio::of(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn a_spread_of_rounds_widens_the_interval() {
        let r = RoundRatio::of(&[0.8, 0.9, 1.0, 1.1, 1.2]).unwrap();
        assert!((r.median - 1.0).abs() < 1e-12);
        assert!(r.ci95[0] < 0.95 && r.ci95[1] > 1.05, "{r}");
        assert!(r.ci95[1] - r.ci95[0] > 0.1);
    }

    #[test]
    fn a_figure_is_pinned_only_by_an_interval_close_on_both_sides() {
        let at = |lo, hi| RoundRatio { median: 0.5, ci95: [lo, hi] };
        assert!(at(0.46, 0.54).pinned_within(0.05));
        assert!(at(0.45, 0.55).pinned_within(0.05), "the tolerance itself is inside");
        assert!(!at(0.44, 0.51).pinned_within(0.05), "too far below");
        assert!(!at(0.5, 0.57).pinned_within(0.05), "too far above");
        assert!(!RoundRatio::of(&[0.8, 0.9, 1.0, 1.1, 1.2]).unwrap().pinned_within(0.05));
        assert!(RoundRatio::of(&[0.99, 1.0, 1.0, 1.01, 1.0]).unwrap().pinned_within(0.05));
    }

    #[test]
    fn goals_are_judged_on_the_whole_interval() {
        let bar = Bound::AtLeast(0.9);
        assert_eq!(bar.judge([0.92, 1.1]), Judgement::Met);
        assert_eq!(bar.judge([0.5, 0.89]), Judgement::NotMet);
        assert_eq!(bar.judge([0.85, 0.95]), Judgement::Inconclusive);
        let cap = Bound::AtMost(1.5);
        assert_eq!(cap.judge([1.0, 1.5]), Judgement::Met);
        assert_eq!(cap.judge([1.51, 2.0]), Judgement::NotMet);
        assert_eq!(cap.judge([1.4, 1.6]), Judgement::Inconclusive);
        assert_eq!((cap.show("x"), bar.show("")), ("<= 1.5x".to_string(), ">= 0.9".to_string()));
        assert_eq!(bar.judge_clear_of([0.92, 1.1], 0.05), Judgement::Met);
        assert_eq!(bar.judge_clear_of([0.69, 0.89], 0.05), Judgement::Inconclusive, "within the margin");
        assert_eq!(bar.judge_clear_of([0.6, 0.84], 0.05), Judgement::NotMet);
        assert_eq!(bar.judge_clear_of([0.85, 0.95], 0.05), Judgement::Inconclusive);
        assert_eq!(cap.judge_clear_of([1.51, 1.6], 0.2), Judgement::Inconclusive);
        assert_eq!(cap.judge_clear_of([1.71, 2.0], 0.2), Judgement::NotMet);
        assert_eq!(Judgement::NotMet.to_string(), "not met");
        let all = [Judgement::Inconclusive, Judgement::Met, Judgement::NotMet, Judgement::Met];
        assert_eq!(Judgement::tally(all), [2, 1, 1]);
        assert_eq!(Judgement::NotMet.agreed(Judgement::NotMet), Judgement::NotMet);
        assert_eq!(Judgement::NotMet.agreed(Judgement::Met), Judgement::Inconclusive);
        assert_eq!(Judgement::Met.agreed(Judgement::Inconclusive), Judgement::Inconclusive);
        assert_eq!(serde_json::to_value(Judgement::Inconclusive).unwrap(), "inconclusive");
    }

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance
    }

    #[test]
    fn textbook_sample() {
        // The classic example: 2, 4, 4, 4, 5, 5, 7, 9 has mean 5, population
        // variance 4, and sample variance 32 / 7.
        let s = Summary::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(s.mean, 5.0);
        assert_eq!(s.median, 4.5);
        assert!((s.variance - 32.0 / 7.0).abs() < 1e-12);
        assert!((s.sigma - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert_eq!((s.min, s.max), (2.0, 9.0));
        assert!(s.ci95[0] < s.mean && s.mean < s.ci95[1], "{:?}", s.ci95);
        assert!(s.ci95[0] >= s.min && s.ci95[1] <= s.max);
    }

    #[test]
    fn odd_count_median_and_single_value() {
        assert_eq!(Summary::of(&[3.0, 1.0, 2.0]).unwrap().median, 2.0);
        let one = Summary::of(&[7.5]).unwrap();
        assert_eq!((one.median, one.mean, one.variance, one.sigma, one.ci95), (7.5, 7.5, 0.0, 0.0, [7.5, 7.5]));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn empty_or_non_finite_has_no_summary() {
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[1.0, f64::NAN]), None);
        assert_eq!(Summary::of(&[f64::INFINITY]), None);
    }

    #[test]
    fn splitmix_matches_the_reference_sequence() {
        // First outputs of SplitMix64 seeded with 0 (Vigna's reference code).
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(rng.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        let mut rng = SplitMix64::new(7);
        assert!((0..1000).all(|_| rng.below(5) < 5));
    }

    #[test]
    fn fixed_seed_bootstrap_is_reproducible_and_about_right() {
        // 1..=100: mean 50.5, sigma 29.01; the mean's 95% interval is about
        // 50.5 +- 1.96 * 29.01 / 10 = [44.8, 56.2].
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        let a = bootstrap_ci(&values, RESAMPLES, SEED, mean_of);
        let b = bootstrap_ci(&values, RESAMPLES, SEED, mean_of);
        assert_eq!(a, b, "same seed, same interval");
        assert!(close(a[0], 44.8, 1.0) && close(a[1], 56.2, 1.0), "{a:?}");
        let other = bootstrap_ci(&values, RESAMPLES, SEED + 1, mean_of);
        assert_ne!(a, other, "the seed matters");
        assert!(close(other[0], 44.8, 1.0) && close(other[1], 56.2, 1.0), "{other:?}");
    }

    /// The 99% interval of the same resamples: 50.5 +- 2.576 * 2.901 =
    /// [43.0, 58.0], holding the 95% one.
    #[test]
    fn a_99_percent_interval_holds_the_95_percent_one() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        let ci95 = bootstrap_interval(&values, RESAMPLES, SEED, 0.95, mean_of);
        assert_eq!(ci95, bootstrap_ci(&values, RESAMPLES, SEED, mean_of));
        let ci99 = bootstrap_interval(&values, RESAMPLES, SEED, 0.99, mean_of);
        assert!(close(ci99[0], 43.0, 1.0) && close(ci99[1], 58.0, 1.0), "{ci99:?}");
        assert!(ci99[0] < ci95[0] && ci95[1] < ci99[1], "{ci99:?} holds {ci95:?}");
        let per_round = [&values[..]];
        let of_rounds = RoundRatio::interval_of_rounds(&per_round, |round| round[0], 0.99).unwrap();
        assert!(of_rounds[0] < 50.5 && 50.5 < of_rounds[1], "the median's: {of_rounds:?}");
    }

    #[test]
    fn ratio_interval_brackets_the_ratio() {
        let before = [10.0, 11.0, 9.0, 10.5, 9.5];
        let after = [20.0, 22.0, 18.0, 21.0, 19.0];
        let ci = bootstrap_ratio_ci(&before, &after, RESAMPLES, SEED);
        assert!(ci[0] < 2.0 && 2.0 < ci[1], "{ci:?}");
        assert!(ci[0] > 1.6 && ci[1] < 2.4, "{ci:?}");
    }

    #[test]
    fn mann_whitney_exact_textbook_example() {
        // a = 19 22 16 29 24, b = 20 11 17 12: U = 17, and 7 of the 126
        // splits have U >= 17, so the two-sided p is 14 / 126 = 0.1111.
        let t = mann_whitney(&[19.0, 22.0, 16.0, 29.0, 24.0], &[20.0, 11.0, 17.0, 12.0]).unwrap();
        assert_eq!(t.u, 17.0);
        assert!(t.exact);
        assert!(close(t.p_value, 14.0 / 126.0, 1e-12), "{t:?}");
        let reverse = mann_whitney(&[20.0, 11.0, 17.0, 12.0], &[19.0, 22.0, 16.0, 29.0, 24.0]).unwrap();
        assert_eq!(reverse.u, 3.0);
        assert!(close(reverse.p_value, t.p_value, 1e-12));
    }

    #[test]
    fn mann_whitney_normal_approximation_with_ties() {
        // Ties (2 thrice, 3 and 4 twice): U = 11.5, tie-corrected sigma
        // 6.94207, continuity-corrected z = -1.29644, p = 0.194823.
        let t = mann_whitney(&[1.0, 2.0, 2.0, 3.0, 5.0, 7.0], &[2.0, 3.0, 4.0, 4.0, 6.0, 8.0, 9.0]).unwrap();
        assert_eq!(t.u, 11.5);
        assert!(!t.exact);
        assert!(close(t.p_value, 0.194_823, 1e-5), "{t:?}");
    }

    #[test]
    fn mann_whitney_edge_cases() {
        assert_eq!(mann_whitney(&[], &[1.0]), None);
        assert_eq!(mann_whitney(&[f64::NAN], &[1.0]), None);
        let all_tied = mann_whitney(&[1.0, 1.0], &[1.0, 1.0]).unwrap();
        assert_eq!((all_tied.u, all_tied.p_value), (2.0, 1.0));
        // Complete separation of 4 and 4 values: p = 2 / C(8, 4) = 2 / 70.
        let t = mann_whitney(&[5.0, 6.0, 7.0, 8.0], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert!(close(t.p_value, 2.0 / 70.0, 1e-12), "{t:?}");
    }

    #[test]
    fn erfc_known_values() {
        assert!(close(erfc(0.0), 1.0, 1e-7));
        assert!(close(erfc(1.0), 0.157_299_207, 1e-7));
        assert!(close(erfc(-1.0), 1.842_700_793, 1e-7));
        assert!(close(erfc(1.959_963_985 / std::f64::consts::SQRT_2), 0.05, 1e-7));
    }

    #[test]
    fn verdicts_say_faster_slower_or_nothing() {
        let before = [100.0, 102.0, 98.0, 101.0, 99.0];
        let after = [150.0, 152.0, 149.0, 151.0, 148.0];
        let up = compare(&before, &after).unwrap();
        assert_eq!(up.verdict, Verdict::Faster);
        assert!(close(up.ratio, 1.5, 1e-9));
        assert!(up.ratio_ci95[0] <= up.ratio && up.ratio <= up.ratio_ci95[1]);
        assert_eq!(compare(&after, &before).unwrap().verdict, Verdict::Slower);
        // Seed 004's outcome: overlapping runs, no real gain.
        let same = compare(&[100.0, 103.0, 98.0, 101.0], &[101.5, 99.0, 102.0, 100.5]).unwrap();
        assert_eq!(same.verdict, Verdict::NoSignificantDifference);
        assert_eq!(serde_json::to_value(same.verdict).unwrap(), "no significant difference");
        assert_eq!(compare(&[0.0, 0.0], &[1.0, 2.0]), None);
    }
}
