#include "inca/olaf/aom_tracker.h"

#include <algorithm>

namespace inca::olaf {

using dp::TimeNs;

namespace {
// ∫ over [a, b] of (s − u) ds: a trapezoid with sides a − u and b − u.
double Trapezoid(TimeNs a, TimeNs b, TimeNs u) {
  const double w = static_cast<double>(b - a);
  return w * (static_cast<double>(a - u) + static_cast<double>(b - u)) / 2.0;
}
}  // namespace

AomTracker::AomTracker(size_t max_clusters) : max_clusters_(max_clusters) {
  index_.reserve(max_clusters);
  series_.reserve(max_clusters);
}

const AomTracker::Series* AomTracker::Find(uint16_t cluster) const {
  const auto it = index_.find(cluster);
  return it == index_.end() ? nullptr : &series_[it->second];
}

bool AomTracker::OnDelivery(uint16_t cluster, TimeNs gen_time_ns, TimeNs now) {
  const TimeNs gen = std::min(gen_time_ns, now);
  const auto it = index_.find(cluster);
  if (it == index_.end()) {
    if (series_.size() >= max_clusters_) return false;
    index_.emplace(cluster, static_cast<uint32_t>(series_.size()));
    Series s;
    s.cluster_id = cluster;
    s.freshest_gen = gen;
    s.last_event = s.last_delivery = s.window_start = now;
    s.deliveries = s.refreshes = 1;
    series_.push_back(s);
    return true;
  }
  Series& s = series_[it->second];
  const TimeNs t = std::max(now, s.last_event);  // never integrate backwards
  s.area += Trapezoid(s.last_event, t, s.freshest_gen);
  s.last_event = s.last_delivery = t;
  ++s.deliveries;
  if (gen > s.freshest_gen) {
    const TimeNs peak = t - s.freshest_gen;
    s.peak_last = peak;
    s.peak_max = std::max(s.peak_max, peak);
    s.peak_sum += static_cast<double>(peak);
    ++s.peaks;
    ++s.refreshes;
    s.freshest_gen = gen;
  }
  return true;
}

std::optional<TimeNs> AomTracker::Aom(uint16_t cluster, TimeNs now) const {
  const Series* s = Find(cluster);
  if (s == nullptr) return std::nullopt;
  return std::max<TimeNs>(0, now - s->freshest_gen);
}

std::optional<TimeNs> AomTracker::FreshestGen(uint16_t cluster) const {
  const Series* s = Find(cluster);
  if (s == nullptr) return std::nullopt;
  return s->freshest_gen;
}

std::optional<AomStats> AomTracker::Stats(uint16_t cluster, TimeNs now) const {
  const Series* s = Find(cluster);
  if (s == nullptr) return std::nullopt;
  const TimeNs t = std::max(now, s->last_event);
  AomStats a;
  a.cluster_id = s->cluster_id;
  a.deliveries = s->deliveries;
  a.refreshes = s->refreshes;
  a.freshest_gen_ns = s->freshest_gen;
  a.last_delivery_ns = s->last_delivery;
  a.window_start_ns = s->window_start;
  a.current_ns = t - s->freshest_gen;
  a.peak_last_ns = s->peak_last;
  a.peak_max_ns = s->peak_max;
  a.peaks = s->peaks;
  a.peak_mean_ns = s->peaks ? s->peak_sum / static_cast<double>(s->peaks) : 0.0;
  const double area = s->area + Trapezoid(s->last_event, t, s->freshest_gen);
  a.average_ns = t > s->window_start ? area / static_cast<double>(t - s->window_start)
                                     : static_cast<double>(a.current_ns);
  return a;
}

void AomTracker::ResetWindow(TimeNs now) {
  for (Series& s : series_) {
    const TimeNs t = std::max(now, s.last_event);
    s.window_start = s.last_event = t;
    s.area = 0;
    s.deliveries = s.refreshes = s.peaks = 0;
    s.peak_last = s.peak_max = 0;
    s.peak_sum = 0;
  }
}

std::vector<uint16_t> AomTracker::Clusters() const {
  std::vector<uint16_t> out;
  out.reserve(series_.size());
  for (const Series& s : series_) out.push_back(s.cluster_id);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace inca::olaf
