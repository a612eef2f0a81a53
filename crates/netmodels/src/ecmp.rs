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
use serde::{Deserialize, Serialize};

use crate::error::NetModelError;
use crate::report::Table;
use railyard_topology::units::trim_float;

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
    /// P(L_max = k) for k = 0..=n.
    pub distribution: Vec<f64>,
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

fn ratio_f64(num: &BigUint, den: &BigUint) -> f64 {
    BigRational::new(num.clone().into(), den.clone().into()).to_f64().unwrap_or(f64::NAN)
}

pub fn ecmp_case(n: u32, m: u32, percentile: f64) -> Result<EcmpCase, NetModelError> {
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
    // cumulative[k] = ways with L_max ≤ k; exact up to the k where it reaches the total.
    let mut cumulative: Vec<BigUint> = Vec::with_capacity(n + 1);
    for k in 0..=n {
        let c = if 2 * (k + 1) > n {
            // Only one uplink can hold more than k flows: subtract those assignments exactly.
            let mut over = BigUint::zero();
            for (j, choose) in binom[n].iter().enumerate().skip(k + 1) {
                over += choose * BigUint::from(m - 1).pow((n - j) as u32);
            }
            &total - over * BigUint::from(m)
        } else {
            ways_at_most(n, m, k, &binom)
        };
        cumulative.push(c);
    }
    let distribution: Vec<f64> = (0..=n)
        .map(|k| {
            let below = if k == 0 { BigUint::zero() } else { cumulative[k - 1].clone() };
            ratio_f64(&(&cumulative[k] - &below), &total)
        })
        .collect();
    // E[L_max] = Σ_k P(L_max > k), summed exactly then converted.
    let mut tail = BigUint::zero();
    for c in cumulative.iter().take(n) {
        tail += &total - c;
    }
    let expected = ratio_f64(&tail, &total);
    let target = BigRational::from_float(percentile).unwrap_or_else(BigRational::one);
    let percentile_max = (0..=n)
        .find(|&k| BigRational::new(cumulative[k].clone().into(), total.clone().into()) >= target)
        .unwrap_or(n) as u32;
    let no_collision = cumulative.get(1).cloned().unwrap_or_default();
    let exact = BigRational::new(no_collision.clone().into(), total.clone().into());
    let free = n.div_ceil(m) as u32;
    Ok(EcmpCase {
        flows: n as u32,
        uplinks: m as u32,
        collision_free_max: free,
        distribution,
        expected_max: expected,
        percentile_max,
        no_collision_probability: ratio_f64(&no_collision, &total),
        no_collision_exact: exact.to_string(),
        relative_speed: free as f64 / expected,
    })
}

pub fn ecmp(input: &EcmpInput) -> Result<EcmpOutput, NetModelError> {
    if !(input.percentile > 0.0 && input.percentile <= 1.0) {
        return Err(NetModelError::BadInput { field: "percentile".into(), message: "must be in (0, 1]".into() });
    }
    let cases = input.cases.iter().map(|&(n, m)| ecmp_case(n, m, input.percentile)).collect::<Result<_, _>>()?;
    Ok(EcmpOutput { cases })
}

impl EcmpOutput {
    pub fn markdown(&self, input: &EcmpInput) -> String {
        let mut out = String::from(
            "# ECMP hash collisions (seed 001 §7.5.3)\n\nn equal flows hashed uniformly onto m uplinks; exact distribution of the busiest uplink's load.\n\n",
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
            let sum: f64 = c.distribution.iter().sum();
            assert!((sum - 1.0).abs() < 1e-12);
        }
    }
}
