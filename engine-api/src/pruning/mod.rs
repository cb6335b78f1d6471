//! Context pruning (reference §9). PLACEHOLDER: the implementation lands with the pruning work.
