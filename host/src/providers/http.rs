//! PLACEHOLDER: shared HTTP plumbing (lands with the providers work).
