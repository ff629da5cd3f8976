//! The transformation cache's table: for each value (a row) and each cached chain prefix
//! (a column, `compile::cache_columns`), where that value after that prefix is.
//!
//! An entry reads as 0 (not computed), 1 (the raw value: every step so far left it
//! unchanged) or `k + 2` (value `k` of the cache's arena). Most values come out of most
//! chains unchanged, so a row is two bit sets (computed, unchanged) of `width` bits, and
//! only a row with a changed entry gets a dense row of entries too. On a 10 KB JSON body
//! (1,358 values, 47 columns for CRS) about 100 rows have one: the table is about 40 KB,
//! where a dense table of 32-bit entries grown by doubling took 385 KB.
//!
//! ```text
//! value "Mozilla/5.0", columns 0 (lowercase) and 1 (urlDecodeUni):
//!   computed 0b11, unchanged 0b10, dense row [k + 2, 0]   (arena[k] = "mozilla/5.0")
//! ```
//!
//! Dense entries are 16-bit while every arena index fits, which is every request short of
//! megabytes of body (a 100 KB JSON body keeps about 4,000 transformed values); the first
//! larger index widens them to 32 bits once. Each phase reserves a row for every value it
//! can read (`TransformCache::start_phase`), so the bit sets grow once a phase, to their
//! size, rather than by doubling (which holds the old and the new table at once).

/// Dense entries of the rows with a changed value (see the module doc).
#[derive(Debug)]
enum Dense {
    /// Every entry fits in 16 bits.
    Narrow(Vec<u16>),
    /// An entry did not: the entries were widened.
    Wide(Vec<u32>),
}

/// Entries of the cache's table (see the module doc).
#[derive(Debug)]
pub(super) struct ChainTable {
    /// Columns.
    width: usize,
    /// 64-bit words per bit set: `width` rounded up.
    words: usize,
    /// Per row, `words` pairs of words: "computed" bits and "unchanged" bits, side by
    /// side so that one bounds check and one cache line answer a lookup.
    masks: Vec<[u64; 2]>,
    /// Per row, its row of `dense`, or `u32::MAX` while no entry of it changed the value.
    dense_of: Vec<u32>,
    /// `width` entries per dense row: 0 or `k + 2` (changed) as in the module doc.
    dense: Dense,
}

impl Default for ChainTable {
    fn default() -> Self {
        Self {
            width: 0,
            words: 0,
            masks: Vec::new(),
            dense_of: Vec::new(),
            dense: Dense::Narrow(Vec::new()),
        }
    }
}

impl ChainTable {
    /// Sets the number of columns, removing every row if it changes.
    pub(super) fn set_width(&mut self, width: usize) {
        if self.width != width {
            self.clear();
            self.width = width;
            self.words = width.div_ceil(64);
        }
    }

    /// Number of rows.
    pub(super) fn rows(&self) -> usize {
        self.dense_of.len()
    }

    /// Bytes held, used or not.
    pub(super) fn capacity_bytes(&self) -> usize {
        let dense = match &self.dense {
            Dense::Narrow(t) => t.capacity() * 2,
            Dense::Wide(t) => t.capacity() * 4,
        };
        self.masks.capacity() * 16 + self.dense_of.capacity() * 4 + dense
    }

    /// Removes every row; the capacity (and the width of dense entries) stays.
    pub(super) fn clear(&mut self) {
        self.masks.clear();
        self.dense_of.clear();
        match &mut self.dense {
            Dense::Narrow(t) => t.clear(),
            Dense::Wide(t) => t.clear(),
        }
    }

    /// Makes room for `rows` rows in all, exactly.
    pub(super) fn reserve_rows(&mut self, rows: usize) {
        let more = rows.saturating_sub(self.rows());
        self.masks.reserve_exact(more.saturating_mul(self.words));
        self.dense_of.reserve_exact(more);
    }

    /// Rows the table holds without growing.
    pub(super) fn row_capacity(&self) -> usize {
        self.dense_of.capacity()
    }

    /// Appends a row with no entry computed; returns its index.
    pub(super) fn push_row(&mut self) -> usize {
        self.masks.resize(self.masks.len() + self.words, [0; 2]);
        self.dense_of.push(u32::MAX);
        self.dense_of.len() - 1
    }

    /// The entry of (`row`, `col`); 0 (not computed) for one past the table.
    #[inline]
    pub(super) fn get(&self, row: usize, col: usize) -> u32 {
        let bit = 1u64 << (col % 64);
        match self.masks.get(row * self.words + col / 64) {
            Some(&[computed, _]) if computed & bit == 0 => 0,
            Some(&[_, unchanged]) if unchanged & bit != 0 => 1,
            Some(_) => self.dense_entry(row, col),
            None => 0,
        }
    }

    /// A changed entry (computed, not unchanged).
    fn dense_entry(&self, row: usize, col: usize) -> u32 {
        let Some(&d) = self.dense_of.get(row).filter(|&&d| d != u32::MAX) else {
            return 0;
        };
        let i = d as usize * self.width + col;
        match &self.dense {
            Dense::Narrow(t) => t.get(i).map_or(0, |&e| u32::from(e)),
            Dense::Wide(t) => t.get(i).copied().unwrap_or(0),
        }
    }

    /// Sets the entry of (`row`, `col`) to `entry` (1, or `k + 2`); ignored for a row or
    /// column past the table.
    #[inline]
    pub(super) fn set(&mut self, row: usize, col: usize, entry: u32) {
        let bit = 1u64 << (col % 64);
        if col >= self.width {
            return;
        }
        let Some([computed, unchanged]) = self.masks.get_mut(row * self.words + col / 64) else {
            return;
        };
        *computed |= bit;
        if entry == 1 {
            *unchanged |= bit;
        } else {
            *unchanged &= !bit;
            self.set_dense(row, col, entry);
        }
    }

    /// Writes a changed entry, making the row's dense row on its first one.
    fn set_dense(&mut self, row: usize, col: usize, entry: u32) {
        let width = self.width;
        let d = match self.dense_of[row] {
            u32::MAX => {
                let d = match &mut self.dense {
                    Dense::Narrow(t) => push_zeros(t, width),
                    Dense::Wide(t) => push_zeros(t, width),
                };
                self.dense_of[row] = d as u32;
                d
            }
            d => d as usize,
        };
        let i = d * width + col;
        match &mut self.dense {
            Dense::Narrow(t) => match u16::try_from(entry) {
                Ok(e) => t[i] = e,
                Err(_) => {
                    let mut wide: Vec<u32> = t.iter().map(|&e| u32::from(e)).collect();
                    wide[i] = entry;
                    self.dense = Dense::Wide(wide);
                }
            },
            Dense::Wide(t) => t[i] = entry,
        }
    }
}

/// Appends `width` zeros to `t`; returns the index of the row they make. Grows by a
/// quarter, not by doubling: at most a fifth of the dense rows' memory is unused.
fn push_zeros<T: Copy + Default>(t: &mut Vec<T>, width: usize) -> usize {
    if t.capacity() - t.len() < width {
        t.reserve_exact((t.len() / 4).max(16 * width));
    }
    t.resize(t.len() + width, T::default());
    t.len() / width.max(1) - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_read_back_as_written_and_a_large_one_widens() {
        let mut t = ChainTable::default();
        t.set_width(70); // two words per bit set
        t.reserve_rows(2);
        assert_eq!(t.row_capacity(), 2);
        assert_eq!((t.push_row(), t.push_row()), (0, 1));
        t.set(0, 3, 1);
        t.set(0, 65, 7);
        t.set(1, 69, u32::from(u16::MAX));
        assert!(matches!(t.dense, Dense::Narrow(_)));
        assert_eq!((t.get(0, 3), t.get(0, 65), t.get(1, 69)), (1, 7, 65_535));
        assert_eq!((t.get(0, 4), t.get(1, 3), t.get(0, 64)), (0, 0, 0));
        t.set(1, 0, 70_000);
        assert!(matches!(t.dense, Dense::Wide(_)));
        assert_eq!(
            (t.get(0, 65), t.get(1, 69), t.get(1, 0)),
            (7, 65_535, 70_000)
        );
        // A changed entry can become unchanged and back (a cache does not, but the table
        // does not depend on it).
        t.set(0, 65, 1);
        assert_eq!(t.get(0, 65), 1);
        t.set(0, 65, 9);
        assert_eq!(t.get(0, 65), 9);
        // Past the table: not computed, and ignored when set.
        t.set(2, 0, 5);
        t.set(0, 70, 5);
        assert_eq!((t.get(2, 0), t.get(0, 70)), (0, 0));
        assert_eq!(t.rows(), 2);
        t.clear();
        assert_eq!((t.rows(), t.get(0, 3)), (0, 0));
    }

    #[test]
    fn rows_without_a_changed_value_keep_no_dense_row() {
        let mut t = ChainTable::default();
        t.set_width(47);
        t.reserve_rows(1358);
        for r in 0..1358 {
            t.push_row();
            t.set(r, r % 47, 1);
        }
        t.set(5, 0, 2);
        // One word each for the two bit sets and a row index per row; room for 16 dense
        // rows of 47 when the first is made.
        assert_eq!(t.capacity_bytes(), 1358 * (16 + 4) + 16 * 47 * 2);
    }
}
