//! The standard normal distribution's quantile and tail: turning a credibility or a tail
//! share into standard deviations and back (the simulator's lognormal tails, the router's
//! credible bounds and overturn chances, the semantic cache's verified rule).

/// The chance that a standard normal draw exceeds `z`.
pub fn upper_tail(z: f64) -> f64 {
    0.5 * libm::erfc(z / std::f64::consts::SQRT_2)
}

/// The standard normal quantile (Acklam's rational approximation, |error| < 1.2e-9).
pub fn quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let p = p.clamp(1e-300, 1.0 - 1e-16);
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_accurate() {
        assert!(quantile(0.5).abs() < 1e-9);
        assert!((quantile(0.975) - 1.959_964).abs() < 1e-6);
        assert!((quantile(0.9) - 1.281_552).abs() < 1e-6);
        assert!((quantile(1e-4) + 3.719_016).abs() < 1e-5);
        assert!((quantile(0.99) - 2.326_348).abs() < 1e-6);
    }

    #[test]
    fn the_tail_inverts_the_quantile() {
        assert!((upper_tail(0.0) - 0.5).abs() < 1e-12);
        for p in [1e-4, 0.01, 0.2, 0.5, 0.9, 0.999] {
            assert!(
                (upper_tail(quantile(1.0 - p)) - p).abs() < 1e-8 * p.max(1e-3),
                "{p}"
            );
        }
    }
}
