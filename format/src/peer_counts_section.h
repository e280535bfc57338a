// peer_counts_section.h — writing and reading the flight recorder's peer-counts section.
//
// Private to the format library: the writer calls the first two, the reader the last. Layout and
// meaning: rankscope/format/peer_counts.h.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "rankscope/format/flight_recorder_layout.h"
#include "rankscope/format/peer_counts.h"
#include "seqlock.h"

namespace rankscope::format {

// Fills the directory in the header of a fresh (zeroed) file; the section starts at `offset`.
void init_peer_counts_directory(uint8_t* base, uint64_t offset, const FlightLayoutParams& params);

// Records one all_to_all_v of communicator slot `comm` (one writer thread per communicator).
void write_peer_counts(uint8_t* base, int comm, uint64_t seq, int rank_in_comm, std::span<const size_t> send,
                       std::span<const size_t> recv);

// The valid records of communicator slot `comm` in copies.data() (checked against the copies around it), ascending seq, only those with seq < next_seq.
// Files without the section give none; an inconsistent directory adds a warning and gives none.
std::vector<PeerCountsSnapshot> read_peer_counts(const seqlock::CopyWindow& copies, int comm, uint64_t next_seq,
                                                 const std::string& comm_name, std::vector<std::string>& warnings);

}  // namespace rankscope::format
