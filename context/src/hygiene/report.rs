//! [`PassReport`]: what every hygiene pass reports, in a module of its own so that the passes
//! and the orchestration in `mod.rs` depend on it, and not on each other.

/// What every pass report can say about itself.
///
/// Why a trait: [`run`] repeats some passes until the transcript is stable and adds their
/// reports up, and a host wants one test for "did hygiene change anything".
pub trait PassReport: Default {
    /// Whether the pass changed anything (equivalently, returned a different list).
    fn changed(&self) -> bool;
    /// Adds `other`'s counts to this report.
    fn absorb(&mut self, other: Self);
}
