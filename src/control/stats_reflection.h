// Converts a stats struct to and from its proto message by protobuf
// reflection over the struct's StatField table (inca/control/stats.h), so
// that no figure is spelled again in the gRPC adapter. Counters blocks
// (Block entries) are converted row by row, by the rows' field numbers;
// repeated sub-messages (Repeated entries) are left to the caller, element
// by element.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <variant>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "inca/control/stats.h"

namespace inca::control::stats_internal {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

// Whether the proto field can hold the table entry's member (alternative
// index of StatField::member). A mismatch is skipped, never a crash; the
// stats test keeps the proto and the tables equal.
inline bool TypeMatches(size_t alternative, const google::protobuf::FieldDescriptor* fd) {
  using FD = google::protobuf::FieldDescriptor;
  if (fd == nullptr) return false;
  switch (alternative) {
    case 0: return !fd->is_repeated() && fd->cpp_type() == FD::CPPTYPE_UINT64;
    case 1:
    case 2:
    case 3: return !fd->is_repeated() && fd->cpp_type() == FD::CPPTYPE_UINT32;
    case 4: return !fd->is_repeated() && fd->cpp_type() == FD::CPPTYPE_DOUBLE;
    case 5: return !fd->is_repeated() && fd->cpp_type() == FD::CPPTYPE_BOOL;
    case 6: return !fd->is_repeated() && fd->cpp_type() == FD::CPPTYPE_STRING;
    case 7:
      return fd->is_map() && fd->message_type()->map_key()->cpp_type() == FD::CPPTYPE_STRING &&
             fd->message_type()->map_value()->cpp_type() == FD::CPPTYPE_UINT64;
    case 8: return fd->is_repeated() && !fd->is_map() && fd->cpp_type() == FD::CPPTYPE_MESSAGE;
    default: return !fd->is_repeated() && fd->cpp_type() == FD::CPPTYPE_MESSAGE;
  }
}

// A counters row's field in its block's message, or null when the message
// has no uint64 field of that number (skipped, never a crash).
inline const google::protobuf::FieldDescriptor* RowField(const google::protobuf::Message& sub,
                                                         const counters::Row& row) {
  using FD = google::protobuf::FieldDescriptor;
  const FD* fd = sub.GetDescriptor()->FindFieldByNumber(row.number);
  return fd != nullptr && !fd->is_repeated() && fd->cpp_type() == FD::CPPTYPE_UINT64 ? fd : nullptr;
}

template <typename S>
void FieldsToProto(StatTable<S> table, const S& s, google::protobuf::Message* m) {
  const google::protobuf::Reflection* r = m->GetReflection();
  for (const StatField<S>& f : table) {
    const google::protobuf::FieldDescriptor* fd = m->GetDescriptor()->FindFieldByNumber(f.number);
    if (!TypeMatches(f.member.index(), fd)) continue;
    std::visit(Overloaded{
                   [&](uint64_t S::*p) { r->SetUInt64(m, fd, s.*p); },
                   [&](uint32_t S::*p) { r->SetUInt32(m, fd, s.*p); },
                   [&](uint16_t S::*p) { r->SetUInt32(m, fd, s.*p); },
                   [&](uint8_t S::*p) { r->SetUInt32(m, fd, s.*p); },
                   [&](double S::*p) { r->SetDouble(m, fd, s.*p); },
                   [&](bool S::*p) { r->SetBool(m, fd, s.*p); },
                   [&](std::string S::*p) { r->SetString(m, fd, s.*p); },
                   [&](DropMap S::*p) {
                     for (const auto& [k, v] : s.*p) {
                       google::protobuf::Message* e = r->AddMessage(m, fd);
                       e->GetReflection()->SetString(e, fd->message_type()->map_key(), k);
                       e->GetReflection()->SetUInt64(e, fd->message_type()->map_value(), v);
                     }
                   },
                   [](Repeated) {},
                   [&](const counters::Block<S>& b) {
                     google::protobuf::Message* sub = r->MutableMessage(m, fd);
                     for (size_t i = 0; i < b.size; ++i) {
                       if (const auto* rf = RowField(*sub, b.row(i))) {
                         sub->GetReflection()->SetUInt64(sub, rf, b.get(s, i));
                       }
                     }
                   },
               },
               f.member);
  }
}

template <typename S>
void FieldsFromProto(StatTable<S> table, const google::protobuf::Message& m, S* s) {
  const google::protobuf::Reflection* r = m.GetReflection();
  for (const StatField<S>& f : table) {
    const google::protobuf::FieldDescriptor* fd = m.GetDescriptor()->FindFieldByNumber(f.number);
    if (!TypeMatches(f.member.index(), fd)) continue;
    std::visit(Overloaded{
                   [&](uint64_t S::*p) { s->*p = r->GetUInt64(m, fd); },
                   [&](uint32_t S::*p) { s->*p = r->GetUInt32(m, fd); },
                   [&](uint16_t S::*p) {
                     s->*p = static_cast<uint16_t>(std::min<uint32_t>(r->GetUInt32(m, fd), 0xFFFF));
                   },
                   [&](uint8_t S::*p) {
                     s->*p = static_cast<uint8_t>(std::min<uint32_t>(r->GetUInt32(m, fd), 0xFF));
                   },
                   [&](double S::*p) { s->*p = r->GetDouble(m, fd); },
                   [&](bool S::*p) { s->*p = r->GetBool(m, fd); },
                   [&](std::string S::*p) { s->*p = r->GetString(m, fd); },
                   [&](DropMap S::*p) {
                     for (int i = 0; i < r->FieldSize(m, fd); ++i) {
                       const google::protobuf::Message& e = r->GetRepeatedMessage(m, fd, i);
                       (s->*p)[e.GetReflection()->GetString(e, fd->message_type()->map_key())] =
                           e.GetReflection()->GetUInt64(e, fd->message_type()->map_value());
                     }
                   },
                   [](Repeated) {},
                   [&](const counters::Block<S>& b) {
                     const google::protobuf::Message& sub = r->GetMessage(m, fd);
                     for (size_t i = 0; i < b.size; ++i) {
                       if (const auto* rf = RowField(sub, b.row(i))) {
                         *b.at(*s, i) = sub.GetReflection()->GetUInt64(sub, rf);
                       }
                     }
                   },
               },
               f.member);
  }
}

}  // namespace inca::control::stats_internal
