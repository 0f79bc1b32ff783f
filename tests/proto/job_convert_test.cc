// proto/job_convert.h: the control plane's shared types survive a round trip through the
// gravac.v1 messages and their wire bytes; messages of an older or newer controller (missing or
// unknown fields) map to the documented defaults.
#include "proto/job_convert.h"

#include <string>

#include "gravac/v1/controller.pb.h"
#include "gtest/gtest.h"

namespace gravac::proto {
namespace {

// Serializes and parses again, as the message crosses gRPC.
template <typename Message>
Message OverTheWire(const Message& in) {
  std::string bytes;
  EXPECT_TRUE(in.SerializeToString(&bytes));
  Message out;
  EXPECT_TRUE(out.ParseFromString(bytes));
  return out;
}

TEST(JobConvertTest, DecisionRoundTrip) {
  JobDecision d;
  d.epoch = 7;
  d.first_step = 1234;
  d.theta = 250.0;
  d.theta_candidate = 1000.0;
  d.searching = false;
  d.phase = "done";
  d.gain_min = 0.93;
  d.gain_c = 0.71;
  v1::Decision msg;
  ToProto(d, &msg);
  const JobDecision back = FromProto(OverTheWire(msg));
  EXPECT_EQ(back.epoch, 7);
  EXPECT_EQ(back.first_step, 1234);
  EXPECT_EQ(back.theta, 250.0);
  EXPECT_EQ(back.theta_candidate, 1000.0);
  EXPECT_FALSE(back.searching);
  EXPECT_EQ(back.phase, "done");
  EXPECT_EQ(back.gain_min, 0.93);
  EXPECT_EQ(back.gain_c, 0.71);
}

TEST(JobConvertTest, JobConfigRoundTripBothNormModes) {
  for (bool global_norm : {false, true}) {
    JobConfig c;
    c.compressor = "dgc";
    c.sparse_values = "bf16";
    c.theta_min = 4.0;
    c.theta_max = 2000.0;
    c.job_seed = 0xfedcba9876543210ULL;
    c.global_norm = global_norm;
    v1::JobConfig msg;
    ToProto(c, &msg);
    EXPECT_EQ(msg.norm_mode(), global_norm ? v1::NORM_MODE_GLOBAL_SQUARED_L2
                                           : v1::NORM_MODE_SUM_LAYER_L2);
    const JobConfig back = FromProto(OverTheWire(msg));
    EXPECT_EQ(back.compressor, "dgc");
    EXPECT_EQ(back.sparse_values, "bf16");
    EXPECT_EQ(back.theta_min, 4.0);
    EXPECT_EQ(back.theta_max, 2000.0);
    EXPECT_EQ(back.job_seed, 0xfedcba9876543210ULL);
    EXPECT_EQ(back.global_norm, global_norm);
  }
}

TEST(JobConvertTest, NodeStepStatsRoundTripTakesNodeRankFromTheBatch) {
  NodeStepStats s;
  s.node_rank = 99;  // not carried per entry
  s.step = 42;
  s.theta_used = 10.0;
  s.theta_candidate = 100.0;
  s.n_g = 3.5;
  s.n_min = 3.25;
  s.n_c = 2.75;
  s.step_seconds = 0.125;
  s.samples = 256;
  s.bytes_sent = 1 << 20;
  s.bytes_dense = 1 << 24;
  s.decision_epoch = 3;
  v1::NodeStepStats msg;
  ToProto(s, &msg);
  const NodeStepStats back = FromProto(OverTheWire(msg), /*node_rank=*/2);
  EXPECT_EQ(back.node_rank, 2);
  EXPECT_EQ(back.step, 42);
  EXPECT_EQ(back.theta_used, 10.0);
  EXPECT_EQ(back.theta_candidate, 100.0);
  EXPECT_EQ(back.n_g, 3.5);
  EXPECT_EQ(back.n_min, 3.25);
  EXPECT_EQ(back.n_c, 2.75);
  EXPECT_EQ(back.step_seconds, 0.125);
  EXPECT_EQ(back.samples, 256);
  EXPECT_EQ(back.bytes_sent, 1 << 20);
  EXPECT_EQ(back.bytes_dense, 1 << 24);
  EXPECT_EQ(back.decision_epoch, 3);
}

// An older controller sends no sparse_values: its daemons sent fp32 values.
TEST(JobConvertTest, MissingSparseValuesIsFp32) {
  v1::JobConfig msg;
  msg.set_compressor("topk");
  EXPECT_EQ(FromProto(OverTheWire(msg)).sparse_values, "fp32");
}

// A norm mode this daemon does not know (unspecified, or a newer controller's value) is the
// reference sum of layer norms, never the global norm.
TEST(JobConvertTest, UnknownNormModeIsSumOfLayerNorms) {
  v1::JobConfig msg;
  msg.set_norm_mode(v1::NORM_MODE_UNSPECIFIED);
  EXPECT_FALSE(FromProto(OverTheWire(msg)).global_norm);
  msg.set_norm_mode(static_cast<v1::NormMode>(17));
  EXPECT_FALSE(FromProto(OverTheWire(msg)).global_norm);
}

// Bytes that are not a message (truncated, garbage) do not parse, so nothing is converted.
TEST(JobConvertTest, TruncatedBytesDoNotParse) {
  v1::JobConfig msg;
  msg.set_compressor("redsync");
  std::string bytes;
  ASSERT_TRUE(msg.SerializeToString(&bytes));
  v1::JobConfig parsed;
  EXPECT_FALSE(parsed.ParseFromString(bytes.substr(0, bytes.size() - 2)));
  EXPECT_FALSE(parsed.ParseFromString(std::string("\xff\xff\xff\xff", 4)));
}

// An empty message (all defaults) converts to the zero values, not to JobConfig's defaults: the
// controller always sends every field.
TEST(JobConvertTest, EmptyDecisionIsEpochZero) {
  const JobDecision d = FromProto(OverTheWire(v1::Decision()));
  EXPECT_EQ(d.epoch, 0);
  EXPECT_EQ(d.theta, 0.0);
  EXPECT_EQ(d.phase, "");
}

}  // namespace
}  // namespace gravac::proto
