use super::*;

/// A trim runs once some requests were answered since the last one and none is in flight;
/// never while one runs, and not again until more were answered.
#[test]
fn a_trim_waits_for_answers_and_for_quiet() {
    let t = Trimmer::default();
    assert!(!t.claim(0, 0), "nothing answered yet");
    assert!(!t.claim(5, 1), "a request is in flight");
    assert!(t.claim(5, 0));
    assert!(!t.claim(5, 0), "nothing answered since");
    assert!(t.claim(6, 0));
}
