//! ECMP hash collisions (seed 001 §7.5.3, footnote 38): n equal flows hashed
//! independently and uniformly onto m uplinks. The distribution of the busiest uplink's
//! load L_max is computed exactly: the number of ways to put n labelled flows into m
//! uplinks with at most k on each is n!·[x^n](Σ_{j≤k} x^j/j!)^m (a truncated exponential
//! polynomial), counted here in big integers, so P(L_max ≤ 1) = 1.8e-13 is exact.
//! When each flow shares its link fairly and the group waits for the slowest, the
//! group runs at ⌈n/m⌉ / E[L_max] of its collision-free speed.

use num_bigint::BigUint;
use num_rational::BigRational;
use num_traits::{One, ToPrimitive, Zero};
use railyard_units::chart::{LineChart, Mark, Series};
use serde::{Deserialize, Serialize};

use crate::error::NetModelError;
use railyard_units::units::trim_float;
use railyard_units::Table;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EcmpInput {
    /// (flows n, uplinks m) pairs.
    pub cases: Vec<(u32, u32)>,
    /// Percentile to report (0.99 for p99).
    pub percentile: f64,
}

impl Default for EcmpInput {
    fn default() -> Self {
        // seed 001 §7.5.3 table: 8/32, 8/16, 32/32, 32/16, 128/16.
        EcmpInput { cases: vec![(8, 32), (8, 16), (32, 32), (32, 16), (128, 16)], percentile: 0.99 }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EcmpCase {
    pub flows: u32,
    pub uplinks: u32,
    /// ⌈n/m⌉: the busiest uplink with no collision.
    pub collision_free_max: u32,
    /// P(L_max = k) for k = 0, 1, ... up to where what is left is below 1e-30.
    pub distribution: Vec<f64>,
    /// P(L_max ≥ distribution.len()): the mass not listed, exact (0 when all is listed).
    pub tail_probability: f64,
    pub expected_max: f64,
    pub percentile_max: u32,
    /// P(L_max ≤ 1): no two flows share an uplink.
    pub no_collision_probability: f64,
    /// P(no collision) as an exact fraction.
    pub no_collision_exact: String,
    /// ⌈n/m⌉ / E[L_max]
    pub relative_speed: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EcmpOutput {
    pub cases: Vec<EcmpCase>,
}

/// Ways to put `n` labelled flows into `m` uplinks with at most `k` each.
fn ways_at_most(n: usize, m: usize, k: usize, binom: &[Vec<BigUint>]) -> BigUint {
    // ways[t]: assignments of t chosen flows into the uplinks so far.
    let mut ways = vec![BigUint::zero(); n + 1];
    ways[0] = BigUint::one();
    for _ in 0..m {
        let mut next = vec![BigUint::zero(); n + 1];
        for t in 0..=n {
            for j in 0..=k.min(t) {
                if !ways[t - j].is_zero() {
                    // choose which j of the t flows land on this uplink
                    next[t] += &ways[t - j] * &binom[t][j];
                }
            }
        }
        ways = next;
    }
    std::mem::take(&mut ways[n])
}

/// Counting work allowed per case, in big-number multiply-adds: about 5 s here.
pub const MAX_COUNTING_STEPS: u128 = 50_000_000;

fn ratio_f64(num: &BigUint, den: &BigUint) -> f64 {
    BigRational::new(num.clone().into(), den.clone().into()).to_f64().unwrap_or(f64::NAN)
}

pub fn ecmp_case(n: u32, m: u32, percentile: f64) -> Result<EcmpCase, NetModelError> {
    ecmp_case_within(n, m, percentile, MAX_COUNTING_STEPS, false)?.1.ok_or_else(unreachable_estimate)
}

fn unreachable_estimate() -> NetModelError {
    NetModelError::BadInput { field: "cases".into(), message: "no case counted".into() }
}

/// [`ecmp_case`] with `budget` counting steps left (a run's cases share one budget); with
/// `estimate_only` it stops after checking the budget and returns the steps alone.
fn ecmp_case_within(
    n: u32,
    m: u32,
    percentile: f64,
    budget: u128,
    estimate_only: bool,
) -> Result<(u128, Option<EcmpCase>), NetModelError> {
    if m == 0 || n == 0 {
        return Err(NetModelError::BadInput {
            field: "cases".into(),
            message: "flows and uplinks must be at least 1".into(),
        });
    }
    if n > 512 || m > 512 {
        return Err(NetModelError::BadInput {
            field: "cases".into(),
            message: "exact counting is limited to 512 flows and 512 uplinks".into(),
        });
    }
    let (n, m) = (n as usize, m as usize);
    let mut binom = vec![vec![BigUint::zero(); n + 1]; n + 1];
    for t in 0..=n {
        binom[t][0] = BigUint::one();
        for j in 1..=t {
            binom[t][j] = &binom[t - 1][j - 1] + &binom[t - 1].get(j).cloned().unwrap_or_default();
        }
    }
    let total = BigUint::from(m).pow(n as u32);
    // Assignments where one given uplink holds more than k flows: Σ_{j>k} C(n,j)(m−1)^{n−j}.
    // m times it bounds those where any uplink does (exactly equal once 2(k+1) > n: only
    // one uplink can), which says up front where the listed distribution will stop.
    let over = |k: usize| -> BigUint {
        binom[n].iter().enumerate().skip(k + 1).map(|(j, c)| c * BigUint::from(m - 1).pow((n - j) as u32)).sum()
    };
    let negligible = |tail: &BigUint| tail * BigUint::from(10u32).pow(30) < total;
    let exact_from = |k: usize| 2 * (k + 1) > n;
    let mut steps: u128 = 0;
    for k in 0..=n {
        if exact_from(k) || negligible(&(over(k) * BigUint::from(m))) {
            break;
        }
        steps += (m * (n + 1) * (k + 1)) as u128;
    }
    if steps > budget {
        return Err(NetModelError::BadInput {
            field: "cases".into(),
            message: format!(
                "{n} flows on {m} uplinks takes about {steps:.2e} big-number steps to count exactly; a run may \
                 take {MAX_COUNTING_STEPS:.0e} over all its cases (a few seconds) and {budget:.2e} are left; fewer \
                 flows or uplinks, or fewer cases, count faster",
                steps = steps as f64,
                MAX_COUNTING_STEPS = MAX_COUNTING_STEPS as f64,
                budget = budget as f64
            ),
        });
    }
    if estimate_only {
        return Ok((steps, None));
    }
    // cumulative[k] = ways with L_max ≤ k, counted until what is left is negligible.
    let mut cumulative: Vec<BigUint> = Vec::with_capacity(n + 1);
    for k in 0..=n {
        let c = if exact_from(k) {
            // Only one uplink can hold more than k flows: subtract those assignments exactly.
            &total - over(k) * BigUint::from(m)
        } else {
            ways_at_most(n, m, k, &binom)
        };
        let done = negligible(&(&total - &c));
        cumulative.push(c);
        if done {
            break;
        }
    }
    let listed = cumulative.len();
    let distribution: Vec<f64> = (0..listed)
        .map(|k| {
            let below = if k == 0 { BigUint::zero() } else { cumulative[k - 1].clone() };
            ratio_f64(&(&cumulative[k] - &below), &total)
        })
        .collect();
    let last = cumulative.last().cloned().unwrap_or_default();
    let tail_probability = ratio_f64(&(&total - &last), &total);
    // E[L_max] = Σ_k P(L_max > k), summed exactly then converted; past the listed k the
    // terms are each at most the (negligible) tail, so they are bounded by n·tail.
    let mut tail = BigUint::zero();
    for c in cumulative.iter().take(n) {
        tail += &total - c;
    }
    tail += (&total - &last) * BigUint::from(n.saturating_sub(listed));
    let expected = ratio_f64(&tail, &total);
    let target = BigRational::from_float(percentile).unwrap_or_else(BigRational::one);
    // A percentile below 1 is reached within the listed k (the rest is below 1e-30, and
    // f64's largest number below 1 is 1 − 1.1e-16); p100 is n: all on one uplink can happen.
    let percentile_max = (0..listed)
        .find(|&k| BigRational::new(cumulative[k].clone().into(), total.clone().into()) >= target)
        .unwrap_or(n) as u32;
    let no_collision = cumulative.get(1).cloned().unwrap_or_default();
    let exact = BigRational::new(no_collision.clone().into(), total.clone().into());
    let free = n.div_ceil(m) as u32;
    let case = EcmpCase {
        flows: n as u32,
        uplinks: m as u32,
        collision_free_max: free,
        distribution,
        tail_probability,
        expected_max: expected,
        percentile_max,
        no_collision_probability: ratio_f64(&no_collision, &total),
        no_collision_exact: exact.to_string(),
        relative_speed: free as f64 / expected,
    };
    Ok((steps, Some(case)))
}

pub fn ecmp(input: &EcmpInput) -> Result<EcmpOutput, NetModelError> {
    if !(input.percentile > 0.0 && input.percentile <= 1.0) {
        return Err(NetModelError::BadInput { field: "percentile".into(), message: "must be in (0, 1]".into() });
    }
    // The whole run is checked against one budget before anything is counted.
    let mut budget = MAX_COUNTING_STEPS;
    for &(n, m) in &input.cases {
        let (steps, _) = ecmp_case_within(n, m, input.percentile, budget, true)?;
        budget -= steps.min(budget);
    }
    let mut cases = Vec::with_capacity(input.cases.len());
    for &(n, m) in &input.cases {
        cases.push(ecmp_case_within(n, m, input.percentile, u128::MAX, false)?.1.ok_or_else(unreachable_estimate)?);
    }
    Ok(EcmpOutput { cases })
}

impl EcmpOutput {
    pub fn markdown(&self, input: &EcmpInput) -> String {
        let mut out = String::from(
            "# ECMP hash collisions\n\nn equal flows hashed uniformly onto m uplinks; exact distribution of the busiest uplink's load.\n\n",
        );
        let p = format!("p{}", trim_float(input.percentile * 100.0, 4));
        let mut t = Table::new([
            "flows n",
            "uplinks m",
            "collision-free max",
            "E[L_max]",
            p.as_str(),
            "P(no collision)",
            "relative speed",
        ]);
        for c in &self.cases {
            t.row([
                c.flows.to_string(),
                c.uplinks.to_string(),
                c.collision_free_max.to_string(),
                format!("{:.2}", c.expected_max),
                c.percentile_max.to_string(),
                if c.no_collision_probability == 0.0 {
                    "0".to_string()
                } else if c.no_collision_probability < 1e-3 {
                    format!("{:.1e}", c.no_collision_probability)
                } else {
                    format!("{:.1}%", c.no_collision_probability * 100.0)
                },
                format!("{:.1}%", c.relative_speed * 100.0),
            ]);
        }
        out.push_str(&t.render());
        out.push_str("\nCollisions cost most when flows ≈ uplinks; rail alignment (fewer cross-group flows per leaf) or packet spraying avoids them.\n");
        out
    }
}

/// The model's chart (`railyard model ecmp --svg`).
pub fn chart(o: &EcmpOutput, _: &EcmpInput) -> String {
    LineChart {
        title: "Busiest uplink's load: exact distribution per (flows, uplinks)".into(),
        x_label: "flows on the busiest uplink L_max".into(),
        y_label: "probability".into(),
        log_x: false,
        series: o
            .cases
            .iter()
            .map(|c| Series {
                name: format!("n={} m={} (E={:.2})", c.flows, c.uplinks, c.expected_max),
                points: c
                    .distribution
                    .iter()
                    .enumerate()
                    .filter(|(k, p)| **p > 1e-6 || *k as u32 <= c.percentile_max)
                    .map(|(k, &p)| (k as f64, p))
                    .collect(),
            })
            .collect(),
        marks: o
            .cases
            .iter()
            .map(|c| Mark { x: c.expected_max, y: 0.0, label: format!("E={:.2}", c.expected_max) })
            .collect(),
    }
    .svg()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_table() {
        let o = ecmp(&EcmpInput::default()).unwrap();
        let row = |i: usize| {
            let c = &o.cases[i];
            (
                (c.expected_max * 100.0).round() / 100.0,
                c.percentile_max,
                c.no_collision_probability,
                (c.relative_speed * 1000.0).round() / 10.0,
            )
        };
        assert_eq!((row(0).0, row(0).1, row(0).3), (1.66, 3, 60.1));
        assert!((row(0).2 - 0.386).abs() < 0.0005);
        assert_eq!((row(1).0, row(1).1, row(1).3), (2.06, 4, 48.5));
        assert!((row(1).2 - 0.121).abs() < 0.0005);
        assert_eq!((row(2).0, row(2).1, row(2).3), (3.53, 6, 28.3));
        assert!((row(2).2 / 1.8e-13 - 1.0).abs() < 0.03, "{}", row(2).2);
        assert_eq!((row(3).0, row(3).1, row(3).2, row(3).3), (4.83, 8, 0.0, 41.4));
        assert_eq!((row(4).0, row(4).1, row(4).2, row(4).3), (13.36, 18, 0.0, 59.9));
        for c in &o.cases {
            let sum: f64 = c.distribution.iter().sum::<f64>() + c.tail_probability;
            assert!((sum - 1.0).abs() < 1e-12);
            assert!(c.tail_probability < 1e-30);
        }
    }

    /// Listing stops where the rest is below 1e-30, which changes no reported figure:
    /// 8 flows on 16 uplinks lists P(L_max = 0..=8) with all mass, a larger case stops early.
    #[test]
    fn the_listing_stops_at_a_negligible_tail_and_costly_cases_are_refused() {
        let small = ecmp_case(8, 16, 0.99).unwrap();
        assert_eq!((small.distribution.len(), small.tail_probability), (9, 0.0));
        let big = ecmp_case(200, 200, 0.99).unwrap();
        assert!(big.distribution.len() < 60 && big.tail_probability < 1e-30, "{}", big.distribution.len());
        assert!(big.tail_probability > 0.0);
        let e = ecmp_case(512, 512, 0.99).unwrap_err().to_string();
        assert!(e.contains("may take 5e7"), "{e}");
        // The budget is the run's: twenty mid-sized cases do not each get a full one.
        let many = EcmpInput { cases: vec![(200, 512); 20], percentile: 0.99 };
        assert!(ecmp(&many).unwrap_err().to_string().contains("left"));
        let e = ecmp_case(513, 2, 0.99).unwrap_err().to_string();
        assert!(e.contains("512 flows"), "{e}");
        // p100 is every flow on one uplink.
        assert_eq!(ecmp_case(32, 32, 1.0).unwrap().percentile_max, 32);
    }
}
