#include "proto/job_convert.h"

namespace gravac::proto {

void ToProto(const JobDecision& in, gravac::v1::Decision* out) {
  out->set_epoch(in.epoch);
  out->set_first_step(in.first_step);
  out->set_theta(in.theta);
  out->set_theta_candidate(in.theta_candidate);
  out->set_searching(in.searching);
  out->set_phase(in.phase);
  out->set_gain_min(in.gain_min);
  out->set_gain_c(in.gain_c);
}

JobDecision FromProto(const gravac::v1::Decision& in) {
  JobDecision out;
  out.epoch = in.epoch();
  out.first_step = in.first_step();
  out.theta = in.theta();
  out.theta_candidate = in.theta_candidate();
  out.searching = in.searching();
  out.phase = in.phase();
  out.gain_min = in.gain_min();
  out.gain_c = in.gain_c();
  return out;
}

void ToProto(const JobConfig& in, gravac::v1::JobConfig* out) {
  out->set_compressor(in.compressor);
  out->set_sparse_values(in.sparse_values);
  out->set_theta_min(in.theta_min);
  out->set_theta_max(in.theta_max);
  out->set_job_seed(in.job_seed);
  out->set_norm_mode(in.global_norm ? gravac::v1::NORM_MODE_GLOBAL_SQUARED_L2
                                    : gravac::v1::NORM_MODE_SUM_LAYER_L2);
}

JobConfig FromProto(const gravac::v1::JobConfig& in) {
  JobConfig out;
  out.compressor = in.compressor();
  // An older controller does not send it: its daemons sent fp32 values.
  out.sparse_values = in.sparse_values().empty() ? "fp32" : in.sparse_values();
  out.theta_min = in.theta_min();
  out.theta_max = in.theta_max();
  out.job_seed = in.job_seed();
  out.global_norm = in.norm_mode() == gravac::v1::NORM_MODE_GLOBAL_SQUARED_L2;
  return out;
}

void ToProto(const NodeStepStats& in, gravac::v1::NodeStepStats* out) {
  out->set_step(in.step);
  out->set_theta_used(in.theta_used);
  out->set_theta_candidate(in.theta_candidate);
  out->set_n_g(in.n_g);
  out->set_n_min(in.n_min);
  out->set_n_c(in.n_c);
  out->set_step_seconds(in.step_seconds);
  out->set_samples(in.samples);
  out->set_bytes_sent(in.bytes_sent);
  out->set_bytes_dense(in.bytes_dense);
  out->set_decision_epoch(in.decision_epoch);
}

NodeStepStats FromProto(const gravac::v1::NodeStepStats& in, int node_rank) {
  NodeStepStats out;
  out.node_rank = node_rank;
  out.step = in.step();
  out.theta_used = in.theta_used();
  out.theta_candidate = in.theta_candidate();
  out.n_g = in.n_g();
  out.n_min = in.n_min();
  out.n_c = in.n_c();
  out.step_seconds = in.step_seconds();
  out.samples = in.samples();
  out.bytes_sent = in.bytes_sent();
  out.bytes_dense = in.bytes_dense();
  out.decision_epoch = in.decision_epoch();
  return out;
}

}  // namespace gravac::proto
