//! Transcript hygiene passes (in progress).
