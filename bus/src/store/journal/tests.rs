#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

const BIG: usize = DEFAULT_CACHE_BYTES;

fn v(s: &str) -> Option<IVec> {
    Some(IVec::from(s.as_bytes()))
}

fn get(j: &Journal, key: &str) -> Option<String> {
    j.get(RECORDS, key.as_bytes())
        .unwrap()
        .map(|v| String::from_utf8(v.to_vec()).unwrap())
}

fn fresh(cache: usize) -> (tempfile::TempDir, PathBuf, Journal) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.journal");
    let j = Journal::open(&path, cache).unwrap();
    (dir, path, j)
}

/// Where the frames end: the file's length less the zeros a flush wrote ahead.
fn data_end(path: &Path) -> u64 {
    let bytes = std::fs::read(path).unwrap();
    let zeros = bytes.iter().rev().take_while(|b| **b == 0).count();
    (bytes.len() - zeros) as u64
}

fn side_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".cut-"))
        .collect();
    names.sort();
    names
}

#[test]
fn flushed_writes_come_back_after_a_reopen_and_unflushed_ones_do_not() {
    let (_dir, path, j) = fresh(BIG);
    j.set(RECORDS, b"a", v("one")).unwrap();
    j.set(RECORDS, b"b", v("two")).unwrap();
    j.set(RECORDS, b"a", v("one again")).unwrap();
    j.set(RECORDS, b"gone", v("x")).unwrap();
    j.set(RECORDS, b"gone", None).unwrap();
    j.set(TASK_IDS, b"a", v("in the other tree")).unwrap();
    j.flush().unwrap();
    j.set(RECORDS, b"late", v("never flushed")).unwrap();
    drop(j);
    let j = Journal::open(&path, BIG).unwrap();
    assert_eq!(get(&j, "a").as_deref(), Some("one again"));
    assert_eq!(get(&j, "b").as_deref(), Some("two"));
    assert_eq!(get(&j, "gone"), None);
    assert_eq!(get(&j, "late"), None, "not flushed: not durable");
    assert_eq!(j.len(RECORDS), 2);
    assert_eq!(j.get(TASK_IDS, b"a").unwrap(), v("in the other tree"));
}

#[test]
fn compare_and_swap_writes_only_over_the_value_it_names() {
    let (_dir, _path, j) = fresh(BIG);
    assert_eq!(
        j.compare_and_swap(RECORDS, b"k", None, v("1")).unwrap(),
        Ok(())
    );
    assert_eq!(
        j.compare_and_swap(RECORDS, b"k", None, v("2")).unwrap(),
        Err(v("1")),
        "present: answers what it holds"
    );
    assert_eq!(
        j.compare_and_swap(RECORDS, b"k", Some(b"0"), v("2"))
            .unwrap(),
        Err(v("1"))
    );
    assert_eq!(
        j.compare_and_swap(RECORDS, b"k", Some(b"1"), v("2"))
            .unwrap(),
        Ok(())
    );
    assert_eq!(
        j.compare_and_swap(RECORDS, b"k", Some(b"2"), None).unwrap(),
        Ok(())
    );
    assert_eq!(
        j.compare_and_swap(RECORDS, b"k", Some(b"2"), v("3"))
            .unwrap(),
        Err(None),
        "removed: answers absent"
    );
}

#[test]
fn values_no_longer_kept_in_memory_are_read_from_the_file_or_the_pending_frames() {
    // A budget of one byte keeps nothing but the last value.
    let (_dir, _path, j) = fresh(1);
    for i in 0..50 {
        j.set(
            RECORDS,
            format!("k{i:02}").as_bytes(),
            v(&format!("value {i}")),
        )
        .unwrap();
        if i == 20 {
            j.flush().unwrap();
        }
    }
    for i in 0..50 {
        assert_eq!(get(&j, &format!("k{i:02}")), Some(format!("value {i}")));
    }
    let prefixed = j.scan_prefix(RECORDS, b"k1").unwrap();
    let scanned: Vec<_> = prefixed.iter().map(|(k, _)| k.to_vec()).collect();
    let want: Vec<_> = (10..20).map(|i| format!("k{i}").into_bytes()).collect();
    assert_eq!(scanned, want, "in byte order");
    assert_eq!(prefixed[0].1, v("value 10").unwrap());
    assert_eq!(keys(&j, RECORDS).len(), 50);
}

/// Every key of `tree`, sorted.
fn keys(j: &Journal, tree: u8) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    j.for_each(
        tree,
        |e| e,
        |k, _| {
            out.push(k.to_vec());
            Ok(())
        },
    )
    .unwrap();
    out.sort();
    out
}

#[test]
fn keys_sharing_their_first_8_bytes_are_told_apart_here_and_after_a_reopen() {
    let (_dir, path, j) = fresh(1);
    let keys_: [&[u8]; 7] = [
        b"",
        b"a",
        b"a\0",
        b"ab",
        b"abcdefgh",
        b"abcdefgh\0",
        b"abcdefghz",
    ];
    for (i, k) in keys_.iter().enumerate().rev() {
        j.set(RECORDS, k, v(&format!("v{i}"))).unwrap();
    }
    // Written again and one removed, with nothing kept in memory: told apart by the file.
    j.set(RECORDS, b"abcdefgh\0", v("again")).unwrap();
    j.set(RECORDS, b"abcdefgh", None).unwrap();
    let check = |j: &Journal| {
        assert_eq!(j.get(RECORDS, b"abcdefgh").unwrap(), None);
        assert_eq!(j.get(RECORDS, b"abcdefgh\0").unwrap(), v("again"));
        assert_eq!(j.get(RECORDS, b"abcdefghz").unwrap(), v("v6"));
        assert_eq!(j.get(RECORDS, b"a\0").unwrap(), v("v2"));
        assert_eq!(j.get(RECORDS, b"abcdefghy").unwrap(), None);
        let scanned: Vec<Vec<u8>> = j
            .scan_prefix(RECORDS, b"abcdefgh")
            .unwrap()
            .into_iter()
            .map(|(k, _)| k.to_vec())
            .collect();
        assert_eq!(scanned, vec![b"abcdefgh\0".to_vec(), b"abcdefghz".to_vec()]);
        let mut want: Vec<Vec<u8>> = keys_.iter().map(|k| k.to_vec()).collect();
        want.retain(|k| k != b"abcdefgh");
        assert_eq!(keys(j, RECORDS), want);
        assert_eq!(j.len(RECORDS), 6);
    };
    check(&j);
    j.flush().unwrap();
    drop(j);
    let j = Journal::open(&path, 1).unwrap();
    check(&j);
    j.compact_now().unwrap();
    check(&j);
}

#[test]
fn a_frame_cut_short_by_a_crash_is_cut_off_and_kept_aside() {
    let (dir, path, j) = fresh(BIG);
    j.set(RECORDS, b"a", v("whole")).unwrap();
    j.flush().unwrap();
    drop(j);
    // Half of a frame, as a crash mid-write leaves it, ahead of the zeros.
    let end = data_end(&path);
    let mut half = Vec::new();
    push_frame(&mut half, OP_PUT, RECORDS, b"b", b"half written");
    half.truncate(half.len() / 2);
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(&half, end).unwrap();
    drop(file);
    let j = Journal::open(&path, BIG).unwrap();
    assert_eq!(get(&j, "a").as_deref(), Some("whole"));
    assert_eq!(get(&j, "b"), None);
    let side = side_files(dir.path());
    assert_eq!(side, vec![format!("tasks.journal.cut-{end}")]);
    let kept = std::fs::read(dir.path().join(&side[0])).unwrap();
    let zeros = half.iter().rev().take_while(|b| **b == 0).count();
    assert_eq!(kept, half[..half.len() - zeros], "the cut bytes are kept");
    // Writes go on after the cut, and come back.
    j.set(RECORDS, b"c", v("after")).unwrap();
    j.flush().unwrap();
    drop(j);
    let j = Journal::open(&path, BIG).unwrap();
    assert_eq!(get(&j, "c").as_deref(), Some("after"));
    assert_eq!(get(&j, "a").as_deref(), Some("whole"));
    assert_eq!(side_files(dir.path()).len(), 1, "no new cut");
}

#[test]
fn the_zeros_a_flush_wrote_ahead_are_room_not_damage() {
    let (dir, path, j) = fresh(BIG);
    j.set(RECORDS, b"a", v("1")).unwrap();
    j.flush().unwrap();
    drop(j);
    let len = std::fs::metadata(&path).unwrap().len();
    assert_eq!(len, GROW_BY, "grown ahead by a whole step");
    for _ in 0..2 {
        let j = Journal::open(&path, BIG).unwrap();
        assert_eq!(get(&j, "a").as_deref(), Some("1"));
    }
    assert!(side_files(dir.path()).is_empty());
    assert_eq!(std::fs::metadata(&path).unwrap().len(), len);
}

#[test]
fn a_frame_failing_its_checksum_ends_what_is_read_and_the_rest_is_kept_aside() {
    let (dir, path, j) = fresh(BIG);
    j.set(RECORDS, b"a", v("first")).unwrap();
    j.flush().unwrap();
    let second = data_end(&path);
    j.set(RECORDS, b"b", v("second")).unwrap();
    j.set(RECORDS, b"c", v("third")).unwrap();
    j.flush().unwrap();
    drop(j);
    let mut bytes = std::fs::read(&path).unwrap();
    // A bit flipped in the second frame's value.
    let at = second as usize + FRAME_HEAD + BODY_HEAD + 2;
    bytes[at] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let j = Journal::open(&path, BIG).unwrap();
    assert_eq!(get(&j, "a").as_deref(), Some("first"));
    assert_eq!(get(&j, "b"), None);
    assert_eq!(
        get(&j, "c"),
        None,
        "nothing past a damaged frame is trusted"
    );
    assert_eq!(
        side_files(dir.path()),
        vec![format!("tasks.journal.cut-{second}")]
    );
}

#[test]
fn a_file_that_is_not_a_journal_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.journal");
    std::fs::write(&path, b"{\"not\": \"a journal at all\"}\n").unwrap();
    let err = Journal::open(&path, BIG).err().expect("refused");
    let text = err.to_string();
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains("not a task journal"), "{text}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"{\"not\": \"a journal at all\"}\n",
        "left as it was"
    );
}

#[test]
fn a_second_handle_on_one_file_is_refused_until_the_first_is_dropped() {
    let (_dir, path, j) = fresh(BIG);
    let err = Journal::open(&path, BIG).err().expect("refused");
    assert!(err.to_string().contains("already open"), "{err}");
    drop(j);
    Journal::open(&path, BIG).unwrap();
}

#[test]
fn a_failed_sync_leaves_the_frames_pending_and_the_next_flush_writes_them_once() {
    let (_dir, path, j) = fresh(BIG);
    j.set(RECORDS, b"a", v("before")).unwrap();
    j.flush().unwrap();
    j.set(RECORDS, b"b", v("failed once")).unwrap();
    j.set(RECORDS, b"a", v("changed")).unwrap();
    j.fail_sync.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(j.flush().is_err());
    // Still readable (pending again), and on disk nothing of it is read back.
    assert_eq!(get(&j, "b").as_deref(), Some("failed once"));
    let on_disk = std::fs::read(&path).unwrap();
    let fresh_end = data_end(&path);
    assert!(on_disk[fresh_end as usize..].iter().all(|b| *b == 0));
    j.set(RECORDS, b"c", v("after")).unwrap();
    j.flush().unwrap();
    drop(j);
    let j = Journal::open(&path, BIG).unwrap();
    assert_eq!(get(&j, "a").as_deref(), Some("changed"));
    assert_eq!(get(&j, "b").as_deref(), Some("failed once"));
    assert_eq!(get(&j, "c").as_deref(), Some("after"));
    assert_eq!(j.len(RECORDS), 3);
}

#[test]
fn compaction_keeps_the_last_values_and_the_pending_ones_and_drops_the_rest() {
    let (dir, path, j) = fresh(1);
    for round in 0..5 {
        for i in 0..40 {
            j.set(
                RECORDS,
                format!("k{i}").as_bytes(),
                v(&format!("{round}-{i}")),
            )
            .unwrap();
        }
        j.flush().unwrap();
    }
    for i in 0..10 {
        j.set(RECORDS, format!("k{i}").as_bytes(), None).unwrap();
    }
    j.set(TASK_IDS, b"t", v("id")).unwrap();
    j.flush().unwrap();
    let before = data_end(&path);
    // Written after the last flush: pending through the compaction.
    j.set(RECORDS, b"k20", v("pending")).unwrap();
    j.set(RECORDS, b"k30", None).unwrap();
    j.compact_now().unwrap();
    let after = std::fs::metadata(&path).unwrap().len();
    assert!(after < before / 3, "{after} of {before}");
    assert!(!Journal::temp_path(&path).exists());
    assert_eq!(get(&j, "k20").as_deref(), Some("pending"));
    assert_eq!(get(&j, "k30"), None);
    assert_eq!(get(&j, "k15").as_deref(), Some("4-15"));
    // Writes go on after the compaction, at the right places.
    j.set(RECORDS, b"k5", v("new")).unwrap();
    assert_eq!(get(&j, "k5").as_deref(), Some("new"));
    j.flush().unwrap();
    drop(j);
    let j = Journal::open(&path, BIG).unwrap();
    for i in 0..40 {
        let want = match i {
            5 => Some("new".to_string()),
            0..10 | 30 => None,
            20 => Some("pending".to_string()),
            _ => Some(format!("4-{i}")),
        };
        assert_eq!(get(&j, &format!("k{i}")), want, "k{i}");
    }
    assert_eq!(j.get(TASK_IDS, b"t").unwrap(), v("id"));
    assert!(side_files(dir.path()).is_empty());
}

#[test]
fn a_compaction_that_did_not_finish_leaves_the_journal_as_it_was() {
    let (_dir, path, j) = fresh(BIG);
    j.set(RECORDS, b"a", v("1")).unwrap();
    j.flush().unwrap();
    drop(j);
    // What a crash mid-compaction leaves: the temporary file, half written.
    std::fs::write(Journal::temp_path(&path), b"clawbus-tasks-1\n\x05\0").unwrap();
    let j = Journal::open(&path, BIG).unwrap();
    assert_eq!(get(&j, "a").as_deref(), Some("1"));
    assert!(!Journal::temp_path(&path).exists());
}

/// A compaction while a key sharing its head with another was written again: the pending value,
/// shifted to the new file's end, may take the offset the other key had; the moves are made
/// before the shift, so each key keeps its own value.
#[test]
fn a_compaction_keeps_keys_sharing_a_head_apart_when_one_was_written_since() {
    let (_dir, path, j) = fresh(0);
    let (k1, k2) = (b"head0000-A", b"head0000-B");
    j.set(RECORDS, k2, v("x")).unwrap();
    j.set(RECORDS, k1, v("y")).unwrap();
    j.flush().unwrap();
    j.set(RECORDS, k2, v("zz")).unwrap();
    j.compact_now().unwrap();
    let check = |j: &Journal| {
        assert_eq!(j.get(RECORDS, k2).unwrap(), v("zz"));
        assert_eq!(j.get(RECORDS, k1).unwrap(), v("y"));
        assert_eq!(keys(j, RECORDS), vec![k1.to_vec(), k2.to_vec()]);
    };
    check(&j);
    j.flush().unwrap();
    drop(j);
    check(&Journal::open(&path, 0).unwrap());
}

#[test]
fn an_entry_over_the_limits_is_refused_not_written() {
    let (_dir, _path, j) = fresh(BIG);
    let long_key = vec![b'k'; usize::from(u16::MAX) + 1];
    let err = j.set(RECORDS, &long_key, v("x")).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("over the limits"), "{err}");
    assert_eq!(j.len(RECORDS), 0);
}
