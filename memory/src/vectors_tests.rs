use super::*;

#[test]
fn blobs_round_trip() {
    let v = vec![0.5f32, -1.25, 3.0e-8, f32::MAX];
    assert_eq!(from_blob(&to_blob(&v)), Some(v));
    assert_eq!(from_blob(&[1, 2, 3]), None);
}

#[test]
fn cosine_of_known_vectors() {
    assert!((cosine(&[1.0, 0.0], &[1.0, 0.0]) - 1.0).abs() < 1e-6);
    assert!(cosine(&[1.0, 0.0], &[0.0, 2.0]).abs() < 1e-6);
    assert!((cosine(&[1.0, 1.0], &[-2.0, -2.0]) + 1.0).abs() < 1e-6);
    assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
    assert_eq!(cosine(&[1.0], &[1.0, 0.0]), 0.0);
}

#[test]
fn top_k_keeps_the_best_in_order() {
    let mut top = TopK::new(3);
    for (id, score) in [(1, 0.1), (2, 0.9), (3, 0.5), (4, 0.7), (5, 0.2), (6, 0.9)] {
        top.push(id, score);
    }
    assert_eq!(top.into_sorted(), vec![(2, 0.9), (6, 0.9), (4, 0.7)]);
}

#[test]
fn the_matrix_finds_the_nearest_rows() {
    let mut m = VectorMatrix::new(9);
    for id in 0..20i64 {
        let mut v = vec![0.0f32; 9];
        v[(id % 9) as usize] = 1.0 + id as f32;
        v[8] = 0.1;
        m.push(id, &v);
    }
    m.push(99, &[1.0, 2.0]); // wrong length: skipped
    assert_eq!(m.len(), 20);
    let mut q = vec![0.0f32; 9];
    q[3] = 1.0;
    let hits = m.search(&q, 2);
    let ids: Vec<i64> = hits.iter().map(|h| h.0).collect();
    // Rows 3 and 12 point along axis 3; 12 is longer, so its 0.1 tail weighs less.
    assert_eq!(ids, vec![12, 3]);
    assert!(hits[0].1 > 0.99);
    assert!(m.search(&[0.0; 9], 2).is_empty());
}
