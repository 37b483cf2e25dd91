//! Summary statistics of repeated measurements: one module used by every
//! workload, so every table and JSON object means the same thing.

use serde::Serialize;

/// Median, mean, sample variance (n - 1), standard deviation, min and max of
/// a set of measurements, as reported by lockperf in seed 004.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
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
        let median = if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
        let mean = sorted.iter().sum::<f64>() / n as f64;
        let variance =
            if n > 1 { sorted.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64 } else { 0.0 };
        Some(Self { median, mean, variance, sigma: variance.sqrt(), min: sorted[0], max: sorted[n - 1] })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn odd_count_median_and_single_value() {
        assert_eq!(Summary::of(&[3.0, 1.0, 2.0]).unwrap().median, 2.0);
        let one = Summary::of(&[7.5]).unwrap();
        assert_eq!((one.median, one.mean, one.variance, one.sigma), (7.5, 7.5, 0.0, 0.0));
    }

    #[test]
    fn empty_or_non_finite_has_no_summary() {
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[1.0, f64::NAN]), None);
        assert_eq!(Summary::of(&[f64::INFINITY]), None);
    }
}
