#include "client/group_roster.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace inca::client {
namespace {

bool SameGroup(const RosterEntry& a, const RosterEntry& b) {
  return a.group_id == b.group_id && a.world_size == b.world_size;
}

std::string RankList(const std::vector<int>& ranks) {
  return absl::StrCat("rank", ranks.size() > 1 ? "s " : " ", absl::StrJoin(ranks, ","));
}

// "the ranks disagree on group id (1 on rank 0; 2 on ranks 1,2)": each
// value once, in the order of the lowest rank that gave it. Built from the
// entries alone, so every rank that read the same ones says the same.
std::string Disagreement(std::vector<RosterEntry> entries) {
  std::sort(entries.begin(), entries.end(), [](const RosterEntry& a, const RosterEntry& b) {
    return std::tie(a.rank, a.group_id, a.world_size) < std::tie(b.rank, b.group_id, b.world_size);
  });
  bool ids = false, sizes = false;
  for (const RosterEntry& e : entries) {
    ids = ids || e.group_id != entries[0].group_id;
    sizes = sizes || e.world_size != entries[0].world_size;
  }
  const char* field = ids && sizes ? "group id and world size" : ids ? "group id" : "world size";
  std::vector<std::pair<std::string, std::vector<int>>> values;
  for (const RosterEntry& e : entries) {
    std::string v = ids && sizes ? absl::StrCat("group ", e.group_id, " of ", e.world_size)
                    : ids        ? absl::StrCat(e.group_id)
                                 : absl::StrCat(e.world_size);
    auto it =
        std::find_if(values.begin(), values.end(), [&](const auto& p) { return p.first == v; });
    if (it == values.end()) it = values.insert(values.end(), {v, {}});
    if (it->second.empty() || it->second.back() != e.rank) it->second.push_back(e.rank);
  }
  std::vector<std::string> parts;
  for (const auto& [v, ranks] : values) parts.push_back(absl::StrCat(v, " on ", RankList(ranks)));
  return absl::StrCat("group creation: the ranks disagree on ", field, " (",
                      absl::StrJoin(parts, "; "), "); no group was formed");
}

// Ranks in [0, world) that no entry of `group` claims, and those claimed
// more than once.
void Coverage(const RosterEntry& group, std::span<const RosterEntry> all, std::vector<int>* missing,
              std::vector<int>* doubled) {
  std::vector<int> n(static_cast<size_t>(group.world_size), 0);
  for (const RosterEntry& e : all) {
    if (SameGroup(e, group)) ++n[static_cast<size_t>(e.rank)];
  }
  for (int r = 0; r < group.world_size; ++r) {
    if (n[static_cast<size_t>(r)] == 0 && missing) missing->push_back(r);
    if (n[static_cast<size_t>(r)] > 1 && doubled) doubled->push_back(r);
  }
}

}  // namespace

std::string RosterKey(int64_t i) {
  return absl::StrCat("inca/roster/", i);
}

std::string VerdictClaimKey(int64_t i) {
  return absl::StrCat(RosterKey(i), "/claimed");
}
std::string VerdictKey(int64_t i) {
  return absl::StrCat(RosterKey(i), "/verdict");
}

std::string Encode(const RosterEntry& e) {
  return absl::StrCat(e.rank, " ", e.group_id, " ", e.world_size, " ", e.own_store ? 1 : 0);
}

std::optional<RosterEntry> Decode(std::string_view text) {
  std::vector<std::string> f = absl::StrSplit(std::string(text), ' ');
  RosterEntry e;
  int own = 0;
  if (f.size() != 4 || !absl::SimpleAtoi(f[0], &e.rank) || !absl::SimpleAtoi(f[1], &e.group_id) ||
      !absl::SimpleAtoi(f[2], &e.world_size) || !absl::SimpleAtoi(f[3], &own)) {
    return std::nullopt;
  }
  if (e.world_size < 1 || e.rank < 0 || e.rank >= e.world_size || (own != 0 && own != 1)) {
    return std::nullopt;
  }
  e.own_store = own == 1;
  return e;
}

RosterJudgement JudgeRoster(const RosterEntry& me, std::span<const RosterEntry> all,
                            bool timed_out) {
  const bool own_store =
      std::any_of(all.begin(), all.end(), [](const auto& e) { return e.own_store; });
  std::vector<RosterEntry> relevant;
  std::vector<size_t> named;
  bool conflict = false;
  for (size_t i = 0; i < all.size(); ++i) {
    const RosterEntry& e = all[i];
    const bool other = !SameGroup(e, me);
    if (other && !own_store && e.group_id != me.group_id) continue;
    relevant.push_back(e);
    named.push_back(i);
    conflict = conflict || other;
  }
  std::vector<int> missing, doubled;
  Coverage(me, all, &missing, &doubled);
  if (!conflict && timed_out && !missing.empty()) {
    // In a shared store, groups that never formed and claim a rank this
    // one misses: most likely the same processes, told another group id.
    for (const RosterEntry& e : all) {
      if (SameGroup(e, me) || !std::binary_search(missing.begin(), missing.end(), e.rank)) continue;
      std::vector<int> theirs;
      Coverage(e, all, &theirs, nullptr);
      if (theirs.empty()) continue;  // a group that formed
      for (size_t i = 0; i < all.size(); ++i) {
        if (!SameGroup(all[i], e)) continue;
        relevant.push_back(all[i]);
        named.push_back(i);
      }
      conflict = true;
    }
  }
  RosterJudgement j;
  if (conflict) {
    int needed = 0;
    std::set<int> came;
    for (const RosterEntry& e : relevant) {
      needed = std::max(needed, e.world_size);
      came.insert(e.rank);
    }
    if (!timed_out && static_cast<int>(came.size()) < needed) return j;
    j.verdict = RosterVerdict::kRefused;
    j.error = absl::InvalidArgumentError(Disagreement(std::move(relevant)));
    std::sort(named.begin(), named.end());
    named.erase(std::unique(named.begin(), named.end()), named.end());
    j.named = std::move(named);
    return j;
  }
  if (!doubled.empty() && (missing.empty() || timed_out)) {
    j.verdict = RosterVerdict::kRefused;
    j.error = absl::InvalidArgumentError(absl::StrCat(
        "group creation: the ranks disagree on rank: ", RankList(doubled), " of group ",
        me.group_id, " (", me.world_size, " ranks) came more than once; no group was formed"));
    return j;
  }
  if (missing.empty()) {
    j.verdict = RosterVerdict::kFormed;
  } else if (timed_out) {
    j.verdict = RosterVerdict::kRefused;
    j.error = absl::DeadlineExceededError(absl::StrCat("group ", me.group_id, " of ", me.world_size,
                                                       " ranks did not form: ", RankList(missing),
                                                       " never came to the rendezvous"));
  }
  return j;
}

}  // namespace inca::client
