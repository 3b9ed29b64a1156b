// Conversions between the C++ control types and their protobuf messages.
#pragma once

#include "absl/status/status.h"
#include "inca/control/control_plane.h"
#include "inca/control/v1/control.pb.h"

namespace inca::control {

namespace pb = ::inca::control::v1;

void ToProto(const cais::Rule& r, pb::Rule* out);
// InvalidArgument for ids or ports out of range (ports 0..1023, group 0..255,
// layer/chunk 0..65535).
absl::Status FromProto(const pb::Rule& r, cais::Rule* out);
void ToProto(const cais::RuleKey& k, pb::RuleKey* out);
absl::Status FromProto(const pb::RuleKey& k, cais::RuleKey* out);
void ToProto(const GroupInfo& g, pb::Group* out);
GroupInfo FromProto(const pb::Group& g);
void ToProto(const TreeInstall& t, pb::InstallTreeRequest* out);
// InvalidArgument for an id, size or port out of range.
absl::Status FromProto(const pb::InstallTreeRequest& t, TreeInstall* out);
void ToProto(const Stats& s, pb::Stats* out);
Stats FromProto(const pb::Stats& s);
void ToProto(const OffloadPolicy& p, pb::OffloadPolicy* out);
// InvalidArgument for a group id above 255 or listed twice.
absl::Status FromProto(const pb::OffloadPolicy& p, OffloadPolicy* out);
void ToProto(const OlafStats& s, pb::OlafStats* out);
OlafStats FromProto(const pb::OlafStats& s);

}  // namespace inca::control
