//! A short sweep: every claim holds on every seed.

use paros_sim::RunOptions;
use paros_sim::check::Claim;
use paros_sim::sweep;

#[test]
fn a_short_sweep_has_no_violations() {
    let s = sweep::sweep(&sweep::Seeds::Range { start: 0, count: 20 }, 2, RunOptions::default(), &|_| {});
    assert!(s.failing.is_empty(), "seeds with violations: {:#?}", s.failing);
    assert_eq!(s.violations(), 0);
    for claim in [Claim::OneChosenPerSlot, Claim::SameOutcome, Claim::Converges, Claim::Linearizable] {
        assert!(s.claims.count(claim).checked > 0, "claim \"{}\" was checked", claim.name());
    }
}
