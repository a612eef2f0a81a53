//! Summary statistics the validation tables report.

/// The median of `sorted` (ascending; the mean of the middle two when even); 0 when empty.
pub fn median_of_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The median of `values` in any order; none when there are none.
pub fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    Some(median_of_sorted(&values))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_even_and_empty() {
        assert_eq!(median_of_sorted(&[]), 0.0);
        assert_eq!(median_of_sorted(&[1.0, 2.0, 9.0]), 2.0);
        assert_eq!(median_of_sorted(&[1.0, 2.0, 4.0, 9.0]), 3.0);
        assert_eq!(median(vec![9.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(Vec::new()), None);
    }
}
