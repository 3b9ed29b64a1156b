-- Wireshark / tshark dissector for inca's datagrams (docs/protocol.md):
--   cais       the CAIS header (20 bytes) and payload: group_id, layer_id,
--              chunk_id, ... as the write-up's 5.1 debugging step reads them
--   cais_mgmt  CAIS management: JOIN, JOIN_REPLY, PING, PONG, LEAVE, LEAVE_REPLY, REPORT
--   olaf       OLAF UPDATE, ACK and MODEL
--
-- Use:
--   tshark -X lua_script:tools/wireshark/inca.lua -r capture.pcap -Y cais
--   wireshark -X lua_script:tools/wireshark/inca.lua capture.pcap
--   (or copy the file to ~/.local/lib/wireshark/plugins/)
-- UDP port 9410 (inca-switchd's default) is decoded as inca (CAIS, management
-- or OLAF, told apart by the first byte); for another port use Decode As
-- (`tshark -d udp.port==PORT,cais`), or let the heuristic on the headers'
-- fixed bytes find it (CAIS: op_type < 4, version 1 and payload_len =
-- datagram length - 20, or a run of such datagrams back to back, as a
-- capture before UDP GSO segmentation shows them; management: 0xCA,
-- version 1; OLAF: "OL", version 1;
-- other heuristics may claim a packet first: `-o udp.try_heuristic_first:TRUE`).
-- The byte layout mirrors include/inca/wire/cais.h, mgmt.h and olaf/wire.h;
-- docs/protocol.md is the reference. Malformed fields are flagged as expert
-- info with the same names as the switch's drop reasons.

local CAIS_PORT = 9410
local CAIS_HEADER = 20

local op_names = { [0] = "AllReduce", [1] = "AllGather", [2] = "Broadcast", [3] = "ReduceScatter" }
local reduce_names = { [0] = "sum", [1] = "max", [2] = "min", [3] = "product" }
local dtype_names = { [0] = "f32", [1] = "f16", [2] = "bf16", [3] = "i32" }
local dtype_bytes = { [0] = 4, [1] = 2, [2] = 2, [3] = 4 }

-- ---------------------------------------------------------------- CAIS
local cais = Proto("cais", "CAIS in-switch reduction")
local f = {
  op_type = ProtoField.uint8("cais.op_type", "op_type", base.DEC, op_names),
  group_id = ProtoField.uint8("cais.group_id", "group_id", base.DEC),
  layer_id = ProtoField.uint16("cais.layer_id", "layer_id", base.DEC),
  chunk_id = ProtoField.uint16("cais.chunk_id", "chunk_id", base.DEC),
  total_chunks = ProtoField.uint16("cais.total_chunks", "total_chunks", base.DEC),
  seq_num = ProtoField.uint32("cais.seq_num", "seq_num", base.DEC),
  payload_len = ProtoField.uint32("cais.payload_len", "payload_len", base.DEC),
  version = ProtoField.uint8("cais.version", "version", base.DEC),
  flags = ProtoField.uint8("cais.flags", "flags", base.HEX),
  flag_result = ProtoField.bool("cais.flags.result", "RESULT", 8, nil, 0x01),
  flag_retransmit = ProtoField.bool("cais.flags.retransmit", "RETRANSMIT", 8, nil, 0x02),
  flag_fallback = ProtoField.bool("cais.flags.fallback", "FALLBACK", 8, nil, 0x04),
  flag_declined = ProtoField.bool("cais.flags.declined", "DECLINED", 8, nil, 0x08),
  flag_ack = ProtoField.bool("cais.flags.ack", "ACK", 8, nil, 0x10),
  flag_pending = ProtoField.bool("cais.flags.pending", "PENDING", 8, nil, 0x20),
  reduce_op = ProtoField.uint8("cais.reduce_op", "reduce_op", base.DEC, reduce_names, 0xF0),
  dtype = ProtoField.uint8("cais.dtype", "dtype", base.DEC, dtype_names, 0x0F),
  block = ProtoField.uint8("cais.block", "block", base.DEC),
  payload = ProtoField.bytes("cais.payload", "payload"),
  elements = ProtoField.uint32("cais.elements", "elements", base.DEC),
  kind = ProtoField.string("cais.kind", "kind"),
}
cais.fields = f
local e_malformed = ProtoExpert.new("cais.malformed", "malformed CAIS packet",
                                    expert.group.MALFORMED, expert.severity.ERROR)
cais.experts = { e_malformed }

-- What a packet is, from its flags and payload (docs/protocol.md, Flags).
local function cais_kind(flags, payload_len)
  if bit.band(flags, 0x08) ~= 0 then return "declined notice" end
  if bit.band(flags, 0x04) ~= 0 then return "fallback notice" end
  if bit.band(flags, 0x10) ~= 0 then return "ack" end
  if bit.band(flags, 0x20) ~= 0 then return "pending answer" end
  if bit.band(flags, 0x01) ~= 0 then return "result" end
  if bit.band(flags, 0x02) ~= 0 then
    if payload_len == 0 then return "result request" end
    return "retransmission"
  end
  return "contribution"
end

-- The first validation failure, named as ParseCais names it, or nil.
local function cais_error(buf)
  local len = buf:len()
  if len < CAIS_HEADER then return "too_short" end
  if buf(16, 1):uint() ~= 1 then return "bad_version" end
  if buf(0, 1):uint() >= 4 then return "unknown_op" end
  local rd = buf(18, 1):uint()
  if bit.rshift(rd, 4) >= 4 then return "unknown_reduce_op" end
  if bit.band(rd, 0x0F) >= 4 then return "unknown_dtype" end
  local flags = buf(17, 1):uint()
  if bit.band(flags, 0xC0) ~= 0 then return "unknown_flags" end
  local payload_len = buf(12, 4):uint()
  if payload_len ~= len - CAIS_HEADER then return "payload_len_mismatch" end
  if buf(4, 2):uint() >= buf(6, 2):uint() then return "chunk_out_of_range" end
  if payload_len % dtype_bytes[bit.band(rd, 0x0F)] ~= 0 then return "payload_misaligned" end
  local request = bit.band(flags, 0x03) == 0x02
  if payload_len == 0 and bit.band(flags, 0x34) == 0 and not request then
    return "empty_payload"
  end
  return nil
end

-- One CAIS datagram; returns the Info column text.
local function dissect_one(buf, pinfo, tree)
  local len = buf:len()
  local t = tree:add(cais, buf(), "CAIS")
  if len < CAIS_HEADER then
    t:add_proto_expert_info(e_malformed, "too_short: " .. len .. " bytes, the header has 20")
    return "CAIS malformed (too_short)"
  end
  local op = buf(0, 1):uint()
  local flags = buf(17, 1):uint()
  local payload_len = buf(12, 4):uint()
  t:add(f.op_type, buf(0, 1))
  t:add(f.group_id, buf(1, 1))
  t:add(f.layer_id, buf(2, 2))
  t:add(f.chunk_id, buf(4, 2))
  t:add(f.total_chunks, buf(6, 2))
  t:add(f.seq_num, buf(8, 4))
  t:add(f.payload_len, buf(12, 4))
  t:add(f.version, buf(16, 1))
  local ft = t:add(f.flags, buf(17, 1))
  ft:add(f.flag_result, buf(17, 1))
  ft:add(f.flag_retransmit, buf(17, 1))
  ft:add(f.flag_fallback, buf(17, 1))
  ft:add(f.flag_declined, buf(17, 1))
  ft:add(f.flag_ack, buf(17, 1))
  ft:add(f.flag_pending, buf(17, 1))
  t:add(f.reduce_op, buf(18, 1))
  t:add(f.dtype, buf(18, 1))
  t:add(f.block, buf(19, 1))
  local kind = cais_kind(flags, payload_len)
  t:add(f.kind, kind):set_generated()
  if len > CAIS_HEADER then
    t:add(f.payload, buf(CAIS_HEADER))
    local dt = bit.band(buf(18, 1):uint(), 0x0F)
    if dtype_bytes[dt] then
      t:add(f.elements, math.floor((len - CAIS_HEADER) / dtype_bytes[dt])):set_generated()
    end
  end
  local err = cais_error(buf)
  if err then t:add_proto_expert_info(e_malformed, err) end
  return string.format("%s %s g=%d layer=%d chunk=%d/%d seq=%d len=%d%s",
                       op_names[op] or ("op" .. op), kind, buf(1, 1):uint(),
                       buf(2, 2):uint(), buf(4, 2):uint(), buf(6, 2):uint(),
                       buf(8, 4):uint(), payload_len, err and (" [" .. err .. "]") or "")
end


-- The lengths of the CAIS datagrams `buf` holds back to back, or nil. A
-- capture taken before segmentation (tcpdump on the sender or on loopback,
-- with UDP GSO: docs/design/net.md) shows up to 64 datagrams of one
-- destination as one UDP payload; each is 20 + payload_len bytes.
local function gso_run(buf)
  local len, off, sizes = buf:len(), 0, {}
  while off + CAIS_HEADER <= len do
    if buf(off + 16, 1):uint() ~= 1 or buf(off, 1):uint() >= 4 then return nil end
    local size = CAIS_HEADER + buf(off + 12, 4):uint()
    if off + size > len then return nil end
    sizes[#sizes + 1] = size
    off = off + size
  end
  if off ~= len or #sizes < 2 then return nil end
  return sizes
end

function cais.dissector(buf, pinfo, tree)
  local len = buf:len()
  if len == 0 then return 0 end
  -- One port carries all three (docs/protocol.md): the first byte tells.
  if buf(0, 1):uint() == 0xCA then return Dissector.get("cais_mgmt"):call(buf, pinfo, tree) end
  if len >= 2 and buf(0, 2):uint() == 0x4F4C then return Dissector.get("olaf"):call(buf, pinfo, tree) end
  pinfo.cols.protocol = "CAIS"
  local sizes = len > CAIS_HEADER and gso_run(buf) or nil
  if sizes == nil then
    pinfo.cols.info = dissect_one(buf, pinfo, tree)
    return len
  end
  local off, first = 0, nil
  for _, size in ipairs(sizes) do
    local info = dissect_one(buf:range(off, size):tvb(), pinfo, tree)
    first = first or info
    off = off + size
  end
  pinfo.cols.info = string.format("%d CAIS datagrams (one GSO send): %s ...", #sizes, first)
  return len
end

-- ---------------------------------------------------------------- management
local mgmt = Proto("cais_mgmt", "CAIS management")
local mtype = { [1] = "JOIN", [2] = "JOIN_REPLY", [3] = "PING", [4] = "PONG", [5] = "LEAVE",
                [6] = "LEAVE_REPLY", [7] = "REPORT" }
local mpath = { [0] = "switch", [1] = "host" }
local mstatus = { [0] = "ok", [1] = "pending", [2] = "refused", [3] = "unknown_member" }
local mreason = { [0] = "none", [1] = "bad_request", [2] = "world_size_mismatch",
                  [3] = "rank_taken", [4] = "no_free_port", [5] = "group_conflict",
                  [6] = "port_taken", [7] = "group_busy",
                  [8] = "source_limit" }
local m = {
  magic = ProtoField.uint8("cais_mgmt.magic", "magic", base.HEX),
  version = ProtoField.uint8("cais_mgmt.version", "version", base.DEC),
  type = ProtoField.uint8("cais_mgmt.type", "type", base.DEC, mtype),
  status = ProtoField.uint8("cais_mgmt.status", "status", base.DEC, mstatus),
  nonce = ProtoField.uint32("cais_mgmt.nonce", "nonce", base.HEX),
  group_id = ProtoField.uint8("cais_mgmt.group_id", "group_id", base.DEC),
  reason = ProtoField.uint8("cais_mgmt.reason", "reason", base.DEC, mreason),
  block_order = ProtoField.uint8("cais_mgmt.block_order", "block_order", base.DEC,
                                 { [0] = "ports", [1] = "ranks" }),
  rank = ProtoField.uint16("cais_mgmt.rank", "rank", base.DEC),
  world_size = ProtoField.uint16("cais_mgmt.world_size", "world_size", base.DEC),
  port = ProtoField.uint16("cais_mgmt.port", "port", base.DEC),
  seq_base = ProtoField.uint32("cais_mgmt.seq_base", "seq_base", base.DEC),
  rank_port_count = ProtoField.uint16("cais_mgmt.rank_port_count", "rank_port_count", base.DEC),
  shards = ProtoField.uint8("cais_mgmt.shards", "shards", base.DEC),
  shard = ProtoField.uint8("cais_mgmt.shard", "shard", base.DEC),
  job = ProtoField.uint64("cais_mgmt.job", "job", base.HEX),
  window_chunks = ProtoField.uint16("cais_mgmt.window_chunks", "window_chunks", base.DEC),
  lease_ms = ProtoField.uint32("cais_mgmt.lease_ms", "lease_ms", base.DEC),
  rank_port = ProtoField.uint16("cais_mgmt.rank_port", "rank_port", base.DEC),
  report_bytes = ProtoField.uint64("cais_mgmt.report_bytes", "report_bytes", base.DEC),
  report_duration_us = ProtoField.uint32("cais_mgmt.report_duration_us", "report_duration_us",
                                         base.DEC),
  report_path = ProtoField.uint8("cais_mgmt.report_path", "report_path", base.DEC, mpath),
}
mgmt.fields = m
local e_mgmt = ProtoExpert.new("cais_mgmt.malformed", "malformed management datagram",
                               expert.group.MALFORMED, expert.severity.ERROR)
mgmt.experts = { e_mgmt }

function mgmt.dissector(buf, pinfo, tree)
  local len = buf:len()
  pinfo.cols.protocol = "CAIS-MGMT"
  local t = tree:add(mgmt, buf(), "CAIS management")
  local H = 36  -- header bytes (version 3: byte 9 a JOIN_REPLY ok's block order)
  if len < H then
    t:add_proto_expert_info(e_mgmt, "too_short: " .. len .. " bytes, the header has " .. H)
    pinfo.cols.info = "CAIS management, malformed"
    return len
  end
  t:add(m.magic, buf(0, 1))
  t:add(m.version, buf(1, 1))
  t:add(m.type, buf(2, 1))
  t:add(m.status, buf(3, 1))
  t:add(m.nonce, buf(4, 4))
  t:add(m.group_id, buf(8, 1))
  local ok_reply = buf(2, 1):uint() == 2 and buf(3, 1):uint() == 0
  if ok_reply then t:add(m.block_order, buf(9, 1)) else t:add(m.reason, buf(9, 1)) end
  t:add(m.rank, buf(10, 2))
  t:add(m.world_size, buf(12, 2))
  t:add(m.port, buf(14, 2))
  t:add(m.seq_base, buf(16, 4))
  t:add(m.rank_port_count, buf(20, 2))
  t:add(m.shards, buf(22, 1))
  t:add(m.shard, buf(23, 1))
  -- Bytes 24-31: a JOIN_REPLY's or PONG's window advice (then 6 bytes
  -- zero), every other message's job.
  local advises = buf(2, 1):uint() == 2 or buf(2, 1):uint() == 4
  if advises then t:add(m.window_chunks, buf(24, 2)) else t:add(m.job, buf(24, 8)) end
  t:add(m.lease_ms, buf(32, 4))
  -- The checks of ParseMgmt (src/wire/mgmt.cc), which drops what fails them.
  local n = buf(20, 2):uint()
  local ty, st, why = buf(2, 1):uint(), buf(3, 1):uint(), buf(9, 1):uint()
  if buf(1, 1):uint() ~= 3 then t:add_proto_expert_info(e_mgmt, "bad_version") end
  if ty < 1 or ty > 7 or st > 3 or why > (ok_reply and 1 or 8) then
    t:add_proto_expert_info(e_mgmt, "unknown type, status, reason or block order")
  end
  local shards, shard = buf(22, 1):uint(), buf(23, 1):uint()
  if (ty ~= 2 and (shards ~= 0 or shard ~= 0)) or (shard ~= 0 and shard >= shards) then
    t:add_proto_expert_info(e_mgmt, "shards only in a JOIN_REPLY, and shard below shards")
  end
  if advises and (buf(26, 2):uint() ~= 0 or buf(28, 4):uint() ~= 0) then
    t:add_proto_expert_info(e_mgmt, "bytes 26-31 of a JOIN_REPLY or PONG must be 0")
  end
  if ty == 7 then
    -- REPORT: 16 bytes of measurement, no rank ports.
    if n ~= 0 or len ~= H + 16 then
      t:add_proto_expert_info(e_mgmt, string.format("a REPORT is %d bytes with no rank ports, "
                                                    .. "not %d with %d", H + 16, len, n))
    else
      t:add(m.report_bytes, buf(H, 8))
      t:add(m.report_duration_us, buf(H + 8, 4))
      t:add(m.report_path, buf(H + 12, 1))
      if buf(H + 12, 1):uint() > 1 or buf(H + 13, 3):uint() ~= 0 then
        t:add_proto_expert_info(e_mgmt, "unknown path or non-zero reserved bytes")
      end
    end
  elseif n > 64 or len ~= H + 2 * n then
    t:add_proto_expert_info(e_mgmt, string.format("length %d, but rank_port_count %d needs %d",
                                                  len, n, H + 2 * n))
  elseif n ~= 0 and n ~= buf(12, 2):uint() then
    t:add_proto_expert_info(e_mgmt, string.format("rank_port_count %d is neither 0 nor world_size %d",
                                                  n, buf(12, 2):uint()))
  else
    for i = 0, n - 1 do t:add(m.rank_port, buf(H + 2 * i, 2)):append_text(" (rank " .. i .. ")") end
  end
  local info = string.format("%s g=%d rank=%d/%d", mtype[ty] or ("type " .. ty), buf(8, 1):uint(),
                             buf(10, 2):uint(), buf(12, 2):uint())
  if ty == 7 and len == H + 16 then
    info = info .. string.format(" %s %d B in %d us", mpath[buf(H + 12, 1):uint()] or "?",
                                 buf(H, 8):uint64():tonumber(), buf(H + 8, 4):uint())
  elseif ty % 2 == 0 then
    info = info .. " " .. (mstatus[buf(3, 1):uint()] or "?")
    if buf(3, 1):uint() == 2 then info = info .. " (" .. (mreason[buf(9, 1):uint()] or "?") .. ")" end
  end
  pinfo.cols.info = info
  return len
end

-- ---------------------------------------------------------------- OLAF
local olaf = Proto("olaf", "OLAF AoM-aware queue")
local otype = { [1] = "UPDATE", [2] = "ACK", [3] = "MODEL" }
local o = {
  magic = ProtoField.uint16("olaf.magic", "magic", base.HEX),
  version = ProtoField.uint8("olaf.version", "version", base.DEC),
  type = ProtoField.uint8("olaf.type", "type", base.DEC, otype),
  flags = ProtoField.uint8("olaf.flags", "flags", base.HEX),
  reserved = ProtoField.uint8("olaf.reserved", "reserved", base.HEX),
  cluster_id = ProtoField.uint16("olaf.cluster_id", "cluster_id", base.DEC),
  worker_id = ProtoField.uint32("olaf.worker_id", "worker_id", base.HEX),
  model_version = ProtoField.uint32("olaf.model_version", "model_version", base.DEC),
  gen_time_ns = ProtoField.uint64("olaf.gen_time_ns", "gen_time_ns", base.DEC),
  merged_count = ProtoField.uint32("olaf.merged_count", "merged_count", base.DEC),
  update_id = ProtoField.uint32("olaf.update_id", "update_id", base.DEC),
  frag_index = ProtoField.uint16("olaf.frag_index", "frag_index", base.DEC),
  frag_count = ProtoField.uint16("olaf.frag_count", "frag_count", base.DEC),
  payload_len = ProtoField.uint32("olaf.payload_len", "payload_len", base.DEC),
  queue_util = ProtoField.uint24("olaf.queue_util", "queue_util", base.HEX),
  aom_us = ProtoField.uint32("olaf.aom_us", "aom_us", base.DEC),
  active_clusters = ProtoField.uint16("olaf.active_clusters", "active_clusters", base.DEC),
  payload = ProtoField.bytes("olaf.payload", "payload"),
}
olaf.fields = o
local e_olaf = ProtoExpert.new("olaf.malformed", "malformed OLAF datagram", expert.group.MALFORMED,
                               expert.severity.ERROR)
olaf.experts = { e_olaf }
local olaf_header = { [1] = 40, [2] = 28, [3] = 28 }

function olaf.dissector(buf, pinfo, tree)
  local len = buf:len()
  pinfo.cols.protocol = "OLAF"
  local t = tree:add(olaf, buf(), "OLAF")
  if len < 5 then
    t:add_proto_expert_info(e_olaf, "too_short")
    return len
  end
  t:add(o.magic, buf(0, 2))
  t:add(o.version, buf(2, 1))
  t:add(o.type, buf(3, 1))
  t:add(o.flags, buf(4, 1))
  local ty = buf(3, 1):uint()
  local hdr = olaf_header[ty]
  if hdr == nil then
    t:add_proto_expert_info(e_olaf, "unknown_type " .. ty)
    pinfo.cols.info = "OLAF unknown type " .. ty
    return len
  end
  if len < hdr then
    t:add_proto_expert_info(e_olaf, "too_short: " .. len .. " bytes, the header has " .. hdr)
    pinfo.cols.info = "OLAF " .. otype[ty] .. ", malformed (too_short)"
    return len
  end
  local info
  if ty == 1 then
    t:add(o.reserved, buf(5, 1))
    t:add(o.cluster_id, buf(6, 2))
    t:add(o.worker_id, buf(8, 4))
    t:add(o.model_version, buf(12, 4))
    t:add(o.gen_time_ns, buf(16, 8))
    t:add(o.merged_count, buf(24, 4))
    t:add(o.update_id, buf(28, 4))
    t:add(o.frag_index, buf(32, 2))
    t:add(o.frag_count, buf(34, 2))
    t:add(o.payload_len, buf(36, 4))
    info = string.format("UPDATE cluster=%d worker=0x%08x update=%d frag=%d/%d merged=%d v=%d",
                         buf(6, 2):uint(), buf(8, 4):uint(), buf(28, 4):uint(), buf(32, 2):uint(),
                         buf(34, 2):uint(), buf(24, 4):uint(), buf(12, 4):uint())
  elseif ty == 2 then
    t:add(o.queue_util, buf(5, 3))
    t:add(o.worker_id, buf(8, 4))
    t:add(o.update_id, buf(12, 4))
    t:add(o.model_version, buf(16, 4))
    t:add(o.aom_us, buf(20, 4))
    t:add(o.cluster_id, buf(24, 2))
    t:add(o.active_clusters, buf(26, 2))
    info = string.format("ACK worker=0x%08x update=%d v=%d aom=%dus queue_util=0x%06x",
                         buf(8, 4):uint(), buf(12, 4):uint(), buf(16, 4):uint(), buf(20, 4):uint(),
                         buf(5, 3):uint())
  else
    t:add(o.reserved, buf(5, 1))
    t:add(o.cluster_id, buf(6, 2))
    t:add(o.model_version, buf(8, 4))
    t:add(o.frag_index, buf(12, 2))
    t:add(o.frag_count, buf(14, 2))
    t:add(o.gen_time_ns, buf(16, 8))
    t:add(o.payload_len, buf(24, 4))
    info = string.format("MODEL cluster=%d v=%d frag=%d/%d", buf(6, 2):uint(), buf(8, 4):uint(),
                         buf(12, 2):uint(), buf(14, 2):uint())
  end
  if ty ~= 2 then
    local pl = buf(hdr - 4, 4):uint()
    if pl ~= len - hdr then
      t:add_proto_expert_info(e_olaf, string.format("payload_len_mismatch: payload_len %d, datagram has %d",
                                                    pl, len - hdr))
    elseif len > hdr then
      t:add(o.payload, buf(hdr))
    end
  elseif len ~= 28 then
    t:add_proto_expert_info(e_olaf, "payload_len_mismatch: an ACK is exactly 28 bytes")
  end
  if buf(2, 1):uint() ~= 1 then t:add_proto_expert_info(e_olaf, "bad_version") end
  pinfo.cols.info = info
  return len
end

-- ---------------------------------------------------------------- registration
DissectorTable.get("udp.port"):add(CAIS_PORT, cais)
DissectorTable.get("udp.port"):add_for_decode_as(olaf)

local function heuristic(buf, pinfo, tree)
  local len = buf:len()
  if len >= 5 and buf(0, 1):uint() == 0x4F and buf(1, 1):uint() == 0x4C and buf(2, 1):uint() == 1 then
    olaf.dissector(buf, pinfo, tree)
    return true
  end
  if len >= 24 and buf(0, 1):uint() == 0xCA and buf(1, 1):uint() == 1 then
    mgmt.dissector(buf, pinfo, tree)
    return true
  end
  if len >= CAIS_HEADER and buf(0, 1):uint() < 4 and buf(16, 1):uint() == 1 and
     (buf(12, 4):uint() == len - CAIS_HEADER or gso_run(buf) ~= nil) then
    cais.dissector(buf, pinfo, tree)
    return true
  end
  return false
end
cais:register_heuristic("udp", heuristic)
