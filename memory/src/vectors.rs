//! Vectors in memory: their byte form in the database, cosine similarity, and the matrix a
//! search scans.
//!
//! Vectors are stored as little-endian `f32` blobs (the form sqlite-vec reads too), not as
//! JSON text: a quarter of the size and no parsing. The in-memory matrix holds every row
//! normalised, so that a search is one dot product per chunk; at 100k chunks × 64
//! dimensions that is under a millisecond, several times faster than sqlite-vec's scalar scan.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A vector as the bytes stored in the database.
pub fn to_blob(vector: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(vector.len() * 4);
    for x in vector {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// The vector stored as `blob`; `None` when its length is not a multiple of 4.
pub fn from_blob(blob: &[u8]) -> Option<Vec<f32>> {
    if !blob.len().is_multiple_of(4) {
        return None;
    }
    Some(
        blob.chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
    )
}

/// The cosine similarity of two vectors (0 when either is zero or the lengths differ).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    dot / (na.sqrt() * nb.sqrt())
}

/// Whether every component is zero (such a query has no direction to search in).
pub fn is_zero(v: &[f32]) -> bool {
    v.iter().all(|x| *x == 0.0)
}

/// A chunk id with its similarity, ordered so a `BinaryHeap` keeps the worst on top.
#[derive(Debug, Clone, Copy)]
struct Scored(f32, i64);

impl PartialEq for Scored {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Scored {}
impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scored {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: the heap's top is the lowest score (ties: the highest id), the one to
        // drop when a better candidate comes.
        other
            .0
            .total_cmp(&self.0)
            .then_with(|| self.1.cmp(&other.1))
    }
}

/// Keeps the `k` best `(id, score)` pairs seen.
pub struct TopK {
    k: usize,
    heap: BinaryHeap<Scored>,
}

impl TopK {
    /// An empty selection of at most `k`.
    pub fn new(k: usize) -> Self {
        Self {
            k,
            heap: BinaryHeap::with_capacity(k + 1),
        }
    }

    /// Offers a candidate.
    pub fn push(&mut self, id: i64, score: f32) {
        if self.k == 0 || score.is_nan() {
            return;
        }
        if self.heap.len() < self.k {
            self.heap.push(Scored(score, id));
        } else if let Some(worst) = self.heap.peek()
            && Scored(score, id) < *worst
        {
            self.heap.pop();
            self.heap.push(Scored(score, id));
        }
    }

    /// The kept pairs, best first.
    pub fn into_sorted(self) -> Vec<(i64, f32)> {
        let mut out: Vec<(i64, f32)> = self.heap.into_iter().map(|s| (s.1, s.0)).collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        out
    }
}

/// Every chunk vector of an index, normalised, one row per chunk.
#[derive(Debug, Clone, Default)]
pub struct VectorMatrix {
    ids: Vec<i64>,
    dims: usize,
    data: Vec<f32>,
}

impl VectorMatrix {
    /// An empty matrix for vectors of `dims` components.
    pub fn new(dims: usize) -> Self {
        Self {
            ids: Vec::new(),
            dims,
            data: Vec::new(),
        }
    }

    /// Adds a chunk's vector (normalised here). A vector of another length is skipped.
    pub fn push(&mut self, id: i64, vector: &[f32]) {
        if vector.len() != self.dims {
            return;
        }
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        let scale = if norm > 0.0 { 1.0 / norm } else { 0.0 };
        self.ids.push(id);
        self.data.extend(vector.iter().map(|x| x * scale));
    }

    /// How many vectors it holds.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The vectors' length.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.data.len() * 4 + self.ids.len() * 8
    }

    /// The `k` chunks most similar to `query` (cosine), best first.
    pub fn search(&self, query: &[f32], k: usize) -> Vec<(i64, f32)> {
        if query.len() != self.dims || self.dims == 0 {
            return Vec::new();
        }
        let norm = query.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm == 0.0 {
            return Vec::new();
        }
        let q: Vec<f32> = query.iter().map(|x| x / norm).collect();
        let mut top = TopK::new(k);
        for (row, id) in self.data.chunks_exact(self.dims).zip(&self.ids) {
            top.push(*id, dot(row, &q));
        }
        top.into_sorted()
    }
}

/// A dot product written as eight independent sums, so the compiler vectorises it.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    let mut sum: f32 = lanes.iter().sum();
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        sum += x * y;
    }
    sum
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "vectors_tests.rs"]
mod tests;
