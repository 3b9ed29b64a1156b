// Who came to a group's rendezvous, and whether they agree on the group
// (docs/design/cais-client.md, "Ranks that disagree"). Before the host
// path's mesh forms, every rank appends one entry to a list in the
// rendezvous store, whatever its group id: its rank, group id and world
// size. Ranks that disagree on the group id or the world size then still
// meet there, and each gets the same one-line error built from the entries,
// instead of each timing out alone in a rendezvous keyed by its own group.
// Pure: the communicator reads and writes the store.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace inca::client {

struct RosterEntry {
  int rank = 0;
  uint32_t group_id = 0;
  int world_size = 1;
  // The store belongs to this group alone (its rank 0 serves it): an entry
  // of another group id there is a disagreement, not a neighbour.
  bool own_store = false;
};

// The store's keys: a counter of entries, then entry i (1-based).
inline constexpr std::string_view kRosterCount = "inca/roster/n";
std::string RosterKey(int64_t i);

// "rank group world own": text, so that a store is readable by hand.
std::string Encode(const RosterEntry& e);
std::optional<RosterEntry> Decode(std::string_view text);

enum class RosterVerdict {
  kWait,     // not yet decided: read the next entry when it comes
  kFormed,   // every rank of this group came, and none disagrees
  kRefused,  // `error` says why, the same text on every rank that came
};

struct RosterJudgement {
  RosterVerdict verdict = RosterVerdict::kWait;
  absl::Status error;
  // A disagreement: the positions in `all` of the entries it names.
  std::vector<size_t> named;
};

// Keys of a store shared by groups, where ranks that gave up at different
// times may have read different entries (one already in its next group):
// the first rank to decide claims each entry its error names and writes the
// text there, and every rank returns the text written for its own entry.
std::string VerdictClaimKey(int64_t i);
std::string VerdictKey(int64_t i);

// What `me` concludes from the entries read so far (`all`, its own among
// them). A group forms when its world_size ranks came, each once, and no
// entry contradicts it: one of the same group id with another world size,
// or any other entry in a store of the group's own. A contradiction is
// reported once every rank the disagreeing entries name has come, so that
// each rank names the same entries; `timed_out` (the rendezvous ran past
// host_timeout_ms) reports what came by then, and also counts, as a
// disagreement, entries of other groups that claim a rank this group misses.
RosterJudgement JudgeRoster(const RosterEntry& me, std::span<const RosterEntry> all,
                            bool timed_out);

}  // namespace inca::client
