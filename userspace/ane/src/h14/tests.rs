// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Host tests of the H14 container reader on synthetic containers built
//! here from the format's rules (no Apple-compiled bytes).

use super::*;

use super::synth::*;

fn field(f: &[u8]) -> &'static str {
    match parse(f) {
        Ok(_) => "ok",
        Err(e) => e.field,
    }
}

#[test]
fn the_add_shape_reads_into_the_recorded_sections() {
    let p = parse(&add()).unwrap();
    let ids: Vec<u32> = p.sections.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, shape::SECTION_IDS);
    assert_eq!(
        p.io,
        [
            Io {
                buffer_id: 5,
                dir: Dir::Input,
                size: 0x8000
            },
            Io {
                buffer_id: 6,
                dir: Dir::Input,
                size: 0x8000
            },
            Io {
                buffer_id: 4,
                dir: Dir::Output,
                size: 0x8000
            },
        ]
    );
    // The bindings the add program ran bit-exact with.
    assert_eq!(
        p.refs,
        [
            Ref { slot: 4, tag: 5 },
            Ref { slot: 5, tag: 4 },
            Ref { slot: 6, tag: 6 },
        ]
    );
    let sec = |id| &p.sections.iter().find(|(i, _)| *i == id).unwrap().1;
    let g = sec(1);
    assert_eq!(g.len(), 0x208 + 3 * 0x30);
    assert_eq!(u32_at(g, 0x204, "t").unwrap(), 3);
    assert_eq!(
        u32_at(g, 0x208 + 0x60 + 4, "t").unwrap(),
        4,
        "the output's id"
    );
    assert_eq!(
        u32_at(g, 0x208 + 0x60 + 0x10, "t").unwrap(),
        2,
        "the output's kind"
    );
    assert_eq!(u64_at(g, 0x208 + 0x20, "t").unwrap(), 0x8000);
    let o = sec(4);
    assert_eq!(u32_at(o, 0, "t").unwrap(), 1);
    assert_eq!(u32_at(o, 4 + 8, "t").unwrap(), 3);
    assert_eq!(u32_at(o, 4 + 0x0c + 8, "t").unwrap(), 5);
    assert_eq!(u32_at(o, 4 + 0x10 + 8, "t").unwrap(), 4);
    assert_eq!(sec(2).len(), 64);
    assert_eq!(sec(3).len() as u64, p.header.task_stream_size);
    let t = sec(7);
    assert_eq!(u32_at(t, 0x0c, "t").unwrap(), 1, "one block");
    assert_eq!(u64_at(t, 0x20, "t").unwrap(), p.header.task_stream_size);
    let (bytes, recs) = p.staging();
    for r in &recs {
        assert_eq!(r.offset % 64, 0);
        let s = sec(r.id);
        assert_eq!(&bytes[r.offset as usize..][..s.len()], &s[..]);
    }
    // What the kernel will check, checked the kernel's way.
    shape::check_ids(recs.iter().map(|r| r.id)).unwrap();
}

#[test]
fn kernel_reads_and_constants_at_slot_1_bind_the_kernel_section() {
    let r: Vec<u32> = [
        bar(1, reg::SRC_A, 0),
        bar(3, reg::KDMA_LO + 8, 32),
        bar(5, reg::DST, 0),
    ]
    .concat();
    let p = parse(&container(&[task(&r)], 64, 1, 1)).unwrap();
    assert_eq!(
        p.refs,
        [
            Ref { slot: 1, tag: 2 },
            Ref { slot: 3, tag: 2 },
            Ref { slot: 5, tag: 4 }
        ]
    );
}

#[test]
fn malformed_headers_are_refused_naming_the_field() {
    let good = add();
    assert_eq!(field(&good), "ok");
    assert_eq!(field(&good[..HEADER - 1]), "file size");
    let mut f = good.clone();
    f.push(0);
    assert_eq!(field(&f), "payload");
    let set = |off: usize, v: u32| {
        let mut f = good.clone();
        put32(&mut f, off, v);
        field(&f)
    };
    assert_eq!(set(0x24, 2), "version");
    assert_eq!(set(0x20, 0), "input count");
    assert_eq!(set(0x20, 4), "input count");
    assert_eq!(set(0x18, 0x10000), "constants size");
    assert_eq!(set(0x18, 65), "constants size");
    assert_eq!(set(0x18, 128), "task stream size");
    assert_eq!(set(0x10, 0x20), "task stream size");
    assert_eq!(set(0x28 + 4 * 6, 0), "tile count");
    assert_eq!(set(0x28 + 4 * 4, MAX_TILES + 1), "tile count");
    assert_eq!(set(0x0c, 2), "task count");
    assert_eq!(set(0x08, 60), "first task bytes");
}

#[test]
fn malformed_task_streams_are_refused_naming_the_field() {
    let good = add();
    let mut f = good.clone();
    f[HEADER + 3] = 1;
    assert_eq!(field(&f), "task stream", "no zero frame");
    // The first task declares 7 words, then more than the stream holds.
    let mut f = good.clone();
    put32(&mut f, HEADER + 16, shape::task_word0(7));
    assert_eq!(field(&f), "task length");
    put32(&mut f, HEADER + 16, shape::task_word0(100));
    assert_eq!(field(&f), "task length");
    // Filler after the 14-word task must be zero.
    let mut f = good.clone();
    f[HEADER + 16 + 56] = 1;
    assert_eq!(field(&f), "task stream");
    // A record longer than its task.
    let mut f = good.clone();
    put32(&mut f, HEADER + 16 + 12 * 4, 0x3f << 15);
    assert_eq!(field(&f), "task record");
}

#[test]
fn bindings_outside_the_recorded_rule_are_refused() {
    let one = |recs: &[[u32; 2]], inputs| field(&container(&[task(&recs.concat())], 64, inputs, 2));
    assert_eq!(one(&[bar(4, reg::SRC_A, 0), bar(5, reg::DST, 0)], 1), "ok");
    // Bit 28 of a BAR header.
    let mut b = bar(4, reg::SRC_A, 0);
    b[0] |= 1 << 28;
    assert_eq!(one(&[b, bar(5, reg::DST, 0)], 1), "BAR reference");
    assert_eq!(
        one(&[bar(4, 0x1120, 0), bar(5, reg::DST, 0)], 1),
        "BAR register"
    );
    assert_eq!(
        one(&[bar(2, reg::SRC_A, 0), bar(5, reg::DST, 0)], 1),
        "BAR slot"
    );
    // Source B with one declared input.
    assert_eq!(
        one(&[bar(6, reg::SRC_B, 0), bar(5, reg::DST, 0)], 1),
        "BAR slot"
    );
    // One slot, two buffers.
    assert_eq!(
        one(&[bar(4, reg::SRC_A, 0), bar(4, reg::DST, 0)], 1),
        "BAR slot"
    );
    // Matmul and select shapes.
    assert_eq!(
        one(
            &[
                bar(5, reg::SRC_A, 0),
                bar(6, reg::SRC_A, 0),
                bar(7, reg::DST, 0)
            ],
            2
        ),
        "BAR slots"
    );
    assert_eq!(
        one(
            &[
                bar(6, reg::SRC_A, 0),
                bar(4, reg::SRC_B, 0),
                bar(7, reg::DST, 0)
            ],
            2
        ),
        "BAR slots"
    );
    // An offset past the bound buffer (2 tiles = 0x8000 bytes; constants 64).
    assert_eq!(
        one(&[bar(4, reg::SRC_A, 0x8000), bar(5, reg::DST, 0)], 1),
        "BAR offset"
    );
    assert_eq!(
        one(&[bar(4, reg::SRC_A, 0x7ff0), bar(5, reg::DST, 0)], 1),
        "ok"
    );
    assert_eq!(
        one(&[bar(1, reg::KDMA_LO, 64), bar(5, reg::DST, 0)], 1),
        "BAR offset"
    );
    // No BAR reference at all.
    assert_eq!(field(&container(&[task(&[0, 0])], 64, 1, 2)), "BAR slots");
}

#[test]
fn two_tasks_share_bindings() {
    let t0: Vec<u32> = [bar(4, reg::SRC_A, 0), bar(5, reg::DST, 0)].concat();
    let t1: Vec<u32> = [bar(4, reg::SRC_A, 0x100), bar(5, reg::DST, 0x100)].concat();
    let p = parse(&container(&[task(&t0), task(&t1)], 64, 1, 2)).unwrap();
    assert_eq!(p.tasks.len(), 2);
    assert_eq!(p.refs, [Ref { slot: 4, tag: 5 }, Ref { slot: 5, tag: 4 }]);
    let t = &p.sections.iter().find(|(i, _)| *i == 7).unwrap().1;
    assert_eq!(u32_at(t, 0x0c, "t").unwrap(), 2, "two blocks");
}

#[test]
fn an_h13_stream_is_not_an_h14_container() {
    // An H13 TD stream staged as a file: no H14 header fits it.
    let mut td = vec![0u8; 0x1200];
    put32(&mut td, 0, 0x0040_0000);
    assert!(parse(&td).is_err());
}

/// Truncations and single-byte corruptions of a good container give an
/// error or a program, never a panic.
#[test]
fn corruption_never_panics() {
    let good = add();
    for n in (0..good.len()).step_by(7) {
        let _ = parse(&good[..n]);
    }
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..4000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut f = good.clone();
        let i = (x % f.len() as u64) as usize;
        f[i] = (x >> 32) as u8;
        let _ = parse(&f);
    }
}
