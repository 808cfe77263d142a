// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The doctor's `observations` section: the driver's observation record
//! (`hw::obs`, debugfs `ane-<device>/observations`), each field tagged
//! with the open items of `docs/hardware-record.md` ("Open: what only
//! hardware can settle", items 1 to 15, and hw-2 §3's items as `hw2-N`)
//! it answers.
//!
//! Every field is a value the driver read during normal operation, never
//! an extra experiment. Debugfs is root's: run as another user, the
//! section says it could not read the record and why.

use serde::Serialize;

/// One field of the record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Field {
    /// Its key in the driver's text (`last.event.0`, `boot.scratch1`, ...).
    pub name: String,
    /// Its value, as the driver wrote it.
    pub value: String,
    /// The open items it answers (`"5"`: item 5 of the record's Open
    /// list; `"hw2-5"`: hw-2 §3 item 5; `"context"`: none, it says which
    /// job or run the others belong to).
    pub answers: Vec<&'static str>,
}

/// The `observations` section of the receipt.
#[derive(Clone, Debug, Serialize)]
pub struct Observations {
    /// Whether the record was read.
    pub read: bool,
    /// The debugfs file, when known.
    pub path: Option<String>,
    /// Why it was not read.
    pub why_not: Option<String>,
    /// Every field, in the driver's order.
    pub fields: Vec<Field>,
}

/// The open items a field of this key answers. Keys are matched by their
/// last dotted part, after `last.`/`failed.` or `boot.`/`host.` prefixes.
pub fn answers(key: &str) -> Vec<&'static str> {
    let (scope, leaf) = match key.rsplit_once('.') {
        Some((s, l)) => (s, l),
        None => ("", key),
    };
    // Event words: `last.event.N`.
    if scope.ends_with(".event") || scope == "event" {
        // The id in INFO (1), the line a finish arrives on (2), the four
        // words a pop returns (3), intermediate events (4).
        return vec!["1", "2", "3", "4"];
    }
    let h14 = scope == "boot"
        || scope == "host"
        || scope == "last_call"
        || key == "boot"
        || key.starts_with("call");
    if h14 {
        return match leaf {
            "sm_buffers" | "sm_bytes" | "sm_refused" => vec!["15", "hw2-5"],
            "status" | "calls_refused" => vec!["15", "hw2-2"],
            "lost_finishes" | "odd_events" | "bad_events" | "bad_pointers" => {
                vec!["15", "hw2-3"]
            }
            _ => vec!["15"],
        };
    }
    match leaf {
        "schema" | "generation" | "number" | "td_count" | "outcome" | "last" | "failed" => {
            vec!["context"]
        }
        "jobs" | "jobs_done" | "nid" => vec!["1"],
        "jobs_failed" => vec!["12", "13"],
        "events_stale" => vec!["2", "3"],
        "events_intermediate" => vec!["4"],
        "events_foreign" => vec!["1", "3"],
        "events" => vec!["2", "3", "4"],
        "looks_min" | "looks_max" | "looks" | "job_ns_min" | "job_ns_max" | "job_ns_total"
        | "ns" => vec!["6"],
        "status_first" | "status_last" => vec!["4", "6"],
        "suspends" | "resumes" | "status_after_resume" => vec!["7"],
        "latches" => vec!["5", "12"],
        "dart_error" => vec!["8", "9", "13"],
        _ => vec![],
    }
}

/// Parses the driver's text: `key value` lines under the schema line.
pub fn parse(text: &str) -> Result<Vec<Field>, String> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let first = lines.next().unwrap_or("");
    if first.trim() != ane::hw::obs::SCHEMA_LINE {
        return Err(format!(
            "the first line is {first:?}, not {:?}: a driver of another version",
            ane::hw::obs::SCHEMA_LINE
        ));
    }
    let mut fields = Vec::new();
    for l in lines {
        let (k, v) = l.split_once(' ').unwrap_or((l, ""));
        fields.push(Field {
            name: k.to_string(),
            value: v.trim().to_string(),
            answers: answers(k),
        });
    }
    Ok(fields)
}

/// Reads the record of the device behind `node` (`None`: no node).
pub fn read(node: Option<&std::path::Path>) -> Observations {
    let none = |why: String| Observations {
        read: false,
        path: None,
        why_not: Some(why),
        fields: Vec::new(),
    };
    let Some(node) = node else {
        return none("no accel node of the ane driver".into());
    };
    match ane::system::observations_text(node) {
        Err(e) => none(e),
        Ok((path, text)) => match parse(&text) {
            Ok(fields) => Observations {
                read: true,
                path: Some(path),
                why_not: None,
                fields,
            },
            Err(e) => Observations {
                read: false,
                path: Some(path),
                why_not: Some(e),
                fields: Vec::new(),
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ane::hw::obs::{
        CallEnd, EventKind, FwBoot, FwObs, H13Obs, JobObs, JobOutcome, Seen, EVENTS_KEPT,
    };
    use ane::hw::tm::seq::Event;

    /// Every field of a fully populated record, as the driver's own
    /// writer produces it.
    fn full_texts() -> (String, String) {
        let mut o = H13Obs::default();
        o.resumed();
        let mut j = JobObs {
            nid: 0x40,
            td_count: 2,
            looks: 4,
            ns: 1234,
            status_first: Some(1),
            status_last: Some(1),
            ..JobObs::default()
        };
        for kind in [
            EventKind::Stale,
            EventKind::Intermediate,
            EventKind::Foreign,
            EventKind::Finish,
        ] {
            j.events.push(Seen {
                line: 1,
                kind,
                ev: Event {
                    info: 0x0540_0001,
                    unk1: 0,
                    tmst: 0,
                    unk2: 0,
                },
            });
        }
        o.job(j);
        o.job(JobObs {
            outcome: JobOutcome::Timeout,
            latches: Some([0x2222_2222; 3]),
            ..j
        });
        o.suspended();
        let mut h13 = String::new();
        o.write(&mut h13).unwrap();
        let mut f = FwObs {
            boot: Some(FwBoot::default()),
            ..FwObs::default()
        };
        f.call(CallEnd::Done, 5);
        let mut h14 = String::new();
        f.write(&mut h14).unwrap();
        (h13, h14)
    }

    /// The receipt's schema: every field the driver writes is kept with
    /// its value and tagged with at least one open item (or `context`),
    /// and every H13 and T6021 open item of the record the observation
    /// record can speak to is answered by some field. A key the doctor
    /// does not know would come out untagged and fail here.
    #[test]
    fn every_field_the_driver_writes_is_tagged() {
        let (h13, h14) = full_texts();
        for text in [&h13, &h14] {
            let fields = parse(text).unwrap();
            assert!(fields.len() > 15, "{text}");
            for f in &fields {
                assert!(!f.answers.is_empty(), "field {} answers nothing", f.name);
                assert!(
                    text.contains(&format!("{} {}", f.name, f.value)),
                    "{} lost its value",
                    f.name
                );
            }
        }
        let all: Vec<&str> = parse(&h13)
            .unwrap()
            .into_iter()
            .chain(parse(&h14).unwrap())
            .flat_map(|f| f.answers)
            .collect();
        for item in [
            "1", "2", "3", "4", "5", "6", "7", "8", "9", "12", "13", "15", "hw2-2", "hw2-5",
        ] {
            assert!(all.contains(&item), "open item {item} has no field");
        }
        // Bounded: at most EVENTS_KEPT event lines per job.
        let ev = parse(&h13)
            .unwrap()
            .iter()
            .filter(|f| f.name.starts_with("last.event."))
            .count();
        assert!(ev <= EVENTS_KEPT);
    }

    /// The values are the driver's, not the doctor's: a field carries
    /// exactly what the text said.
    #[test]
    fn values_are_kept_as_written() {
        let (h13, _) = full_texts();
        let fields = parse(&h13).unwrap();
        let get = |k: &str| {
            fields
                .iter()
                .find(|f| f.name == k)
                .map(|f| f.value.as_str())
        };
        assert_eq!(get("jobs"), Some("2"));
        assert_eq!(get("status_after_resume"), Some("0x1"));
        assert_eq!(
            get("failed.latches"),
            Some("0x22222222 0x22222222 0x22222222")
        );
        assert_eq!(
            get("last.event.3"),
            Some("line=1 kind=finish info=0x5400001 unk1=0x0 tmst=0x0 unk2=0x0")
        );
        assert_eq!(
            get("last.event.3").map(|_| answers("last.event.3")),
            Some(vec!["1", "2", "3", "4"])
        );
    }

    /// Another version's text is refused with the reason, not misread.
    #[test]
    fn another_schema_is_refused() {
        let e = parse("schema ane-observations 2\njobs 1\n").unwrap_err();
        assert!(e.contains("another version"), "{e}");
        assert!(parse("").is_err());
    }
}
