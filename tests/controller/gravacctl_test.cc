// gravacctl and gravac-controller as processes: the real controller binary (started with
// --port_file, small policy settings and a job's certificates from runner/job_certs.h), a
// daemon's ControllerClient joining over mutual TLS and reporting steps, `gravacctl status`
// (table and --json) against it, refused without a certificate and in plain text, SIGTERM
// shutdown with the decision log lines; gravacctl against no controller; the table formatter
// on a known status.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "controller/ctl/status_format.h"
#include "core/testing/read_file.h"
#include "core/testing/status_matchers.h"
#include "daemon/control/controller_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/grpc_security.h"
#include "runner/job_certs.h"

namespace gravac::ctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct CommandResult {
  int exit_code = -1;
  std::string output;
};

// Runs a shell command (bounded to 20 s by coreutils timeout) and captures stdout and
// stderr.
CommandResult RunCommand(const std::string& command) {
  CommandResult r;
  FILE* pipe = popen(("timeout 20 " + command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

using ::gravac::testing::ReadFile;

// A gravac-controller process listening on a free port of 127.0.0.1; its stderr in log_file.
struct ControllerProcess {
  pid_t pid = -1;
  std::string address;
  std::string log_file;
};

// Starts the controller binary in `dir` (--listen 127.0.0.1:0 --port_file, then `args`) and waits
// up to 10 s for the port it chose.
absl::StatusOr<ControllerProcess> StartController(const std::string& dir,
                                                  const std::vector<std::string>& args) {
  const std::string port_file = dir + "/port";
  ControllerProcess c;
  c.log_file = dir + "/controller.log";
  unlink(port_file.c_str());
  std::vector<std::string> argv = {CONTROLLER_PATH, "--listen", "127.0.0.1:0", "--port_file",
                                   port_file};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> raw;
  for (std::string& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  c.pid = fork();
  if (c.pid < 0) return absl::InternalError("fork failed");
  if (c.pid == 0) {
    const int fd = open(c.log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    execv(CONTROLLER_PATH, raw.data());
    _exit(127);
  }
  int port = 0;
  for (int i = 0; i < 2000 && port == 0; ++i) {
    std::ifstream in(port_file);
    if (!(in >> port)) port = 0;
    if (port == 0) absl::SleepFor(absl::Milliseconds(5));
  }
  if (port == 0) {
    kill(c.pid, SIGKILL);
    waitpid(c.pid, nullptr, 0);
    return absl::DeadlineExceededError("the controller wrote no port file: " +
                                       ReadFile(c.log_file));
  }
  c.address = absl::StrFormat("127.0.0.1:%d", port);
  return c;
}

// Sends SIGTERM and waits up to 10 s; the wait status. DeadlineExceeded (after a SIGKILL) when it
// did not stop.
absl::StatusOr<int> StopController(const ControllerProcess& c) {
  if (kill(c.pid, SIGTERM) != 0) return absl::InternalError("kill(SIGTERM) failed");
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 1000 && done == 0; ++i) {
    done = waitpid(c.pid, &status, WNOHANG);
    if (done == 0) absl::SleepFor(absl::Milliseconds(10));
  }
  if (done == 0) {
    kill(c.pid, SIGKILL);
    waitpid(c.pid, &status, 0);
    return absl::DeadlineExceededError("gravac-controller did not stop within 10 s of SIGTERM");
  }
  return status;
}

TEST(Gravacctl, FormatsAKnownStatus) {
  gravac::v1::JobStatus s;
  s.set_assembled(true);
  s.set_expected_nodes(2);
  s.set_joined_nodes(2);
  s.set_world_size(4);
  s.mutable_job()->set_compressor("topk");
  s.mutable_job()->set_sparse_values("fp16");
  s.mutable_job()->set_theta_min(10);
  s.mutable_job()->set_theta_max(1000);
  auto* d = s.mutable_decision();
  d->set_epoch(3);
  d->set_first_step(120);
  d->set_theta(40);
  d->set_theta_candidate(80);
  d->set_searching(true);
  d->set_phase("searching");
  d->set_gain_min(0.95);
  d->set_gain_c(0.8125);
  s.set_steps_observed(150);
  s.set_last_step(149);
  s.set_throughput(1000);
  s.set_bytes_sent(1 << 20);
  s.set_bytes_dense(4 << 20);
  s.set_bytes_saved(3 << 20);
  for (int n = 0; n < 2; ++n) {
    auto* node = s.add_nodes();
    node->mutable_info()->set_node_rank(n);
    node->mutable_info()->set_node_name(absl::StrFormat("host-%d", n));
    node->mutable_info()->set_first_rank(2 * n);
    node->mutable_info()->set_local_count(2);
    node->set_watching(n == 0);
    node->set_last_step(149);
  }
  auto* ct = s.add_throughput_table();
  ct->set_theta(10);
  ct->set_mean(812.5);
  ct->set_samples(40);
  ct->set_period_complete(true);
  const std::string table = FormatStatusTable(s);
  EXPECT_THAT(table, HasSubstr("assembled, 2 of 2 nodes, world size 4"));
  EXPECT_THAT(table, HasSubstr("compressor: topk, sparse values fp16, theta in [10, 1000]"));
  EXPECT_THAT(table, HasSubstr("epoch 3 from step 120: theta 40, theta_c 80"));
  EXPECT_THAT(table, HasSubstr("phase searching, searching"));
  EXPECT_THAT(table, HasSubstr("gain_min 0.9500, gain_c 0.8125"));
  EXPECT_THAT(table, HasSubstr("sent 1.0 MiB of 4.0 MiB dense, saved 3.0 MiB (75.0%)"));
  EXPECT_THAT(table, HasSubstr("1     host-1  2-3    no "));
  EXPECT_THAT(table, HasSubstr("812.50"));
  ASSERT_OK_AND_ASSIGN(std::string json, FormatStatusJson(s));
  EXPECT_THAT(json, HasSubstr("\"node_name\": \"host-1\""));
  EXPECT_THAT(json, HasSubstr("\"theta_candidate\": 80"));
  EXPECT_THAT(json, HasSubstr("\"sparse_values\": \"fp16\""));
  // A controller from before sparse_values leaves it empty: its daemons sent fp32 values.
  s.mutable_job()->clear_sparse_values();
  EXPECT_THAT(FormatStatusTable(s), HasSubstr("compressor: topk, sparse values fp32,"));
  EXPECT_EQ(HumanBytes(512), "512 B");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");
}

TEST(Gravacctl, FailsClearlyWithoutAController) {
  CommandResult r =
      RunCommand(std::string(GRAVACCTL_PATH) +
                 " status --controller 127.0.0.1:1 --timeout_s 1 --insecure_plaintext");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("status from controller 127.0.0.1:1"));
  CommandResult no_tls =
      RunCommand(std::string(GRAVACCTL_PATH) + " status --controller 127.0.0.1:1 --timeout_s 1");
  EXPECT_EQ(no_tls.exit_code, 1);
  EXPECT_THAT(no_tls.output, HasSubstr("no TLS credentials"));
  CommandResult usage = RunCommand(std::string(GRAVACCTL_PATH) + " frobnicate --controller x:1");
  EXPECT_EQ(usage.exit_code, 1);
  EXPECT_THAT(usage.output, HasSubstr("usage: gravacctl status"));
}

TEST(Gravacctl, StatusOfARunningController) {
  const std::string dir = ::testing::TempDir() + absl::StrFormat("/gravacctl_test_%d", getpid());
  ASSERT_EQ(RunCommand("mkdir -p " + dir).exit_code, 0);
  const std::string tls_dir = dir + "/tls";
  ASSERT_EQ(RunCommand("rm -rf " + tls_dir + " && mkdir -m 0700 " + tls_dir).exit_code, 0);
  ASSERT_OK_AND_ASSIGN(runner::JobCredentialFiles tls,
                       runner::WriteJobCredentials(tls_dir, {"node-0"}, {"127.0.0.1"}));
  const std::string ctl_tls = " --tls_ca " + tls.ca + " --tls_cert " + tls.client_cert +
                              " --tls_key " + tls.client_key;

  ASSERT_OK_AND_ASSIGN(
      ControllerProcess controller,
      StartController(dir, {"--nodes", "1", "--window", "2", "--eval_steps", "4", "--theta_max",
                            "40", "--epsilon", "0.5", "--alpha", "0", "--decision_delay", "0:20",
                            "--metrics_address", "off", "--sparse_values", "bf16", "--tls_cert",
                            tls.controller_cert, "--tls_key", tls.controller_key, "--tls_ca",
                            tls.ca}));
  const std::string& address = controller.address;
  const std::string& log_file = controller.log_file;

  daemon::ControllerClientOptions o;
  o.address = address;
  o.join_timeout = absl::Seconds(10);
  ASSERT_OK_AND_ASSIGN(o.security,
                       proto::GrpcSecurityFromFiles(tls.node_cert[0], tls.node_key[0], tls.ca,
                                                    proto::GrpcRole::kNodeClient));
  ASSERT_OK_AND_ASSIGN(auto client, daemon::ControllerClient::Create(o));
  ASSERT_OK_AND_ASSIGN(daemon::JoinResult joined,
                       client->Join({"node-0", 0, 2, 2, "address-blob"}));
  EXPECT_EQ(joined.node_rank, 0);
  EXPECT_EQ(joined.job.sparse_values, "bf16");
  client->Start();
  for (int64_t step = 0; step < 12; ++step) {
    const daemon::JobDecision d = client->Newest();
    client->Report(
        {0, step, d.theta, d.theta_candidate, 1.0, 0.9, 0.9, 0.05, 32, 1000, 10000, d.epoch});
    // Follow the decisions like a daemon: wait (bounded) for this step to be observed.
    for (int i = 0; i < 400; ++i) {
      CommandResult r =
          RunCommand(std::string(GRAVACCTL_PATH) + " status --json --controller " + address + ctl_tls);
      if (r.output.find(absl::StrFormat("\"last_step\": \"%d\"", step)) != std::string::npos) {
        break;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
  }
  CommandResult table =
      RunCommand(std::string(GRAVACCTL_PATH) + " status --controller " + address + ctl_tls);
  EXPECT_EQ(table.exit_code, 0) << table.output;
  EXPECT_THAT(table.output, HasSubstr("assembled, 1 of 1 nodes, world size 2"));
  EXPECT_THAT(table.output, HasSubstr("node-0"));
  EXPECT_THAT(table.output, HasSubstr("compressor: topk, sparse values bf16, theta in [10, 40]"));
  EXPECT_THAT(table.output, HasSubstr("12 observed, last step 11"));
  EXPECT_THAT(table.output, HasSubstr("saved 105.5 KiB (90.0%)"));
  EXPECT_THAT(table.output, Not(HasSubstr("epoch 0 ")));
  CommandResult json =
      RunCommand(std::string(GRAVACCTL_PATH) + " status --json --controller " + address + ctl_tls);
  EXPECT_EQ(json.exit_code, 0);
  EXPECT_THAT(json.output, HasSubstr("\"assembled\": true"));
  EXPECT_THAT(json.output, HasSubstr("\"phase\": \""));
  EXPECT_THAT(json.output, HasSubstr("\"sparse_values\": \"bf16\""));
  // Without a client certificate, or in plain text, the controller does not answer.
  CommandResult anonymous = RunCommand(std::string(GRAVACCTL_PATH) + " status --timeout_s 2" +
                                       " --controller " + address + " --tls_ca " + tls.ca);
  EXPECT_EQ(anonymous.exit_code, 1);
  EXPECT_THAT(anonymous.output, HasSubstr("this end uses TLS"));
  CommandResult plain = RunCommand(std::string(GRAVACCTL_PATH) + " status --timeout_s 2" +
                                   " --controller " + address + " --insecure_plaintext");
  EXPECT_EQ(plain.exit_code, 1);
  EXPECT_THAT(plain.output, HasSubstr("this end uses plain text"));
  EXPECT_THAT(ReadFile(log_file), HasSubstr("over mutual TLS"));

  client->Shutdown();
  ASSERT_OK_AND_ASSIGN(int status, StopController(controller));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadFile(log_file);
  const std::string log = ReadFile(log_file);
  EXPECT_THAT(log,
              HasSubstr("job: 1 nodes, compressor topk, sparse values bf16, theta in [10, 40]"));
  EXPECT_THAT(log, HasSubstr("job assembled: 1 nodes, world size 2"));
  EXPECT_THAT(log, HasSubstr("decision epoch 1 from step 2: theta 10 theta_c 10 phase searching"));
  EXPECT_THAT(log, HasSubstr("shutting down"));
  RunCommand("rm -rf " + dir);
}

// One controller process, two jobs at once (each one node, its own ControllerClient as a
// daemon's): each job's steps move only its own policy; `gravacctl jobs` lists both and
// `gravacctl status --job` shows each; after a job's node leaves, the job is ended and a daemon
// naming its run id again is refused naming the node and the job, while the other job runs on;
// a rerun with a new run id is a new job.
TEST(Gravacctl, OneControllerServesSeveralJobs) {
  const std::string dir = ::testing::TempDir() + absl::StrFormat("/gravacctl_jobs_%d", getpid());
  ASSERT_EQ(RunCommand("mkdir -p " + dir).exit_code, 0);
  ASSERT_OK_AND_ASSIGN(
      ControllerProcess controller,
      StartController(dir, {"--nodes", "1", "--window", "2", "--eval_steps", "4", "--theta_max",
                            "40", "--epsilon", "0.5", "--alpha", "0", "--min_dwell", "0",
                            "--metrics_address", "off", "--insecure_plaintext"}));
  const std::string& address = controller.address;
  const std::string& log_file = controller.log_file;
  const std::string ctl =
      std::string(GRAVACCTL_PATH) + " --controller " + address + " --insecure_plaintext ";

  auto join = [&](const std::string& name, const std::string& run) {
    daemon::ControllerClientOptions o;
    o.address = address;
    o.security = proto::GrpcSecurity::Plaintext();
    o.join_timeout = absl::Seconds(10);
    auto client = daemon::ControllerClient::Create(o);
    EXPECT_THAT(client, IsOk());
    daemon::JoinInfo info{"node-0", 0, 2, 2, "address-blob"};
    info.job = {name, run};
    info.nodes = 1;
    auto joined = (*client)->Join(info);
    return std::make_pair(std::move(client).value(), joined.status());
  };
  auto [a, a_joined] = join("alpha", "r1");
  ASSERT_THAT(a_joined, IsOk());
  auto [b, b_joined] = join("beta", "r1");
  ASSERT_THAT(b_joined, IsOk());
  a->Start();
  b->Start();
  // Job alpha runs 12 steps; beta 3. Each follows its own decisions.
  auto run = [&](daemon::ControllerClient& c, const std::string& name, int from, int to) {
    for (int64_t step = from; step < to; ++step) {
      const daemon::JobDecision d = c.Newest();
      c.Report(
          {0, step, d.theta, d.theta_candidate, 1.0, 0.9, 0.8, 0.05, 32, 1000, 10000, d.epoch});
      for (int i = 0; i < 400; ++i) {
        CommandResult r = RunCommand(ctl + "status --json --job " + name);
        if (r.output.find(absl::StrFormat("\"last_step\": \"%d\"", step)) !=
            std::string::npos) {
          break;
        }
        absl::SleepFor(absl::Milliseconds(5));
      }
    }
  };
  run(*a, "alpha", 0, 12);
  run(*b, "beta", 0, 3);
  CommandResult jobs = RunCommand(ctl + "jobs");
  EXPECT_EQ(jobs.exit_code, 0) << jobs.output;
  EXPECT_THAT(jobs.output, HasSubstr("JOB"));
  EXPECT_THAT(jobs.output, HasSubstr("alpha"));
  EXPECT_THAT(jobs.output, HasSubstr("beta"));
  CommandResult alpha = RunCommand(ctl + "status --job alpha");
  EXPECT_THAT(alpha.output, HasSubstr("name:       alpha, run r1, running"));
  EXPECT_THAT(alpha.output, HasSubstr("12 observed, last step 11"));
  EXPECT_THAT(alpha.output, Not(HasSubstr("epoch 0 ")));
  CommandResult beta = RunCommand(ctl + "status --job beta");
  EXPECT_THAT(beta.output, HasSubstr("3 observed, last step 2"));
  EXPECT_THAT(beta.output, HasSubstr("epoch 1 "));  // beta's own warm-up ended; nothing of alpha's
  EXPECT_GT(a->Newest().epoch, b->Newest().epoch);
  CommandResult none = RunCommand(ctl + "status --job gamma");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_THAT(none.output, HasSubstr("job 'gamma' is not known"));

  // alpha's node leaves: alpha ended; its run id is refused, beta runs on.
  a->Shutdown();
  ASSERT_OK_AND_ASSIGN(bool ended, a->Leave());
  EXPECT_TRUE(ended);
  EXPECT_THAT(RunCommand(ctl + "status --job alpha").output, HasSubstr("run r1, ended"));
  auto [again, again_joined] = join("alpha", "r1");
  EXPECT_EQ(again_joined.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again_joined.message(), HasSubstr("node 'node-0'"));
  EXPECT_THAT(again_joined.message(), HasSubstr("job 'alpha' run 'r1' ended"));
  run(*b, "beta", 3, 5);
  EXPECT_THAT(RunCommand(ctl + "status --job beta").output, HasSubstr("5 observed, last step 4"));
  auto [rerun, rerun_joined] = join("alpha", "r2");
  EXPECT_THAT(rerun_joined, IsOk());
  EXPECT_THAT(RunCommand(ctl + "status --job alpha").output, HasSubstr("run r2, running"));
  EXPECT_THAT(RunCommand(ctl + "status --job alpha --run_id r1").output,
              HasSubstr("12 observed"));

  b->Shutdown();
  rerun->Shutdown();
  ASSERT_OK_AND_ASSIGN(int status, StopController(controller));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadFile(log_file);
  EXPECT_THAT(ReadFile(log_file), HasSubstr("job 'alpha' run 'r1' ended"));
  RunCommand("rm -rf " + dir);
}

// A job that failed on one of its nodes (rpc FailJob, as gravacd sends when its session fails or
// it refuses the job's worker at hello): its waiting Join ends at once with Aborted, and
// `gravacctl jobs` and `gravacctl status --job` (table and --json) show it failed, with the
// failure naming the job, the node and the reason; the other job stays running.
TEST(Gravacctl, ShowsAFailedJob) {
  const std::string dir = ::testing::TempDir() + absl::StrFormat("/gravacctl_failed_%d", getpid());
  ASSERT_EQ(RunCommand("mkdir -p " + dir).exit_code, 0);
  ASSERT_OK_AND_ASSIGN(
      ControllerProcess controller,
      StartController(dir, {"--nodes", "2", "--metrics_address", "off", "--insecure_plaintext",
                            "--join_timeout_s", "60"}));
  const std::string ctl = std::string(GRAVACCTL_PATH) + " --controller " + controller.address +
                          " --insecure_plaintext ";
  auto client = [&]() {
    daemon::ControllerClientOptions o;
    o.address = controller.address;
    o.security = proto::GrpcSecurity::Plaintext();
    o.join_timeout = absl::Seconds(30);
    absl::StatusOr<std::unique_ptr<daemon::ControllerClient>> c =
        daemon::ControllerClient::Create(o);
    EXPECT_THAT(c, IsOk());
    return std::move(c).value();
  };
  // Job "steady": one node, joined and running. Job "doomed": node-0 joined, waiting for node-1.
  auto steady = client();
  daemon::JoinInfo steady_info{"node-0", 0, 1, 1, "address-blob"};
  steady_info.job = {"steady", "r1"};
  steady_info.nodes = 1;
  ASSERT_THAT(steady->Join(steady_info).status(), IsOk());
  auto waiting = client();
  daemon::JoinInfo doomed_info{"node-0", 0, 1, 2, "address-blob"};
  doomed_info.job = {"doomed", "r1"};
  absl::Status joined = absl::UnknownError("not returned");
  absl::Time join_returned;
  std::thread join([&] {
    joined = waiting->Join(doomed_info).status();
    join_returned = absl::Now();
  });
  for (int i = 0; i < 400; ++i) {  // until node-0's Join is in
    if (RunCommand(ctl + "status --json --job doomed").output.find("\"joined_nodes\": 1") !=
        std::string::npos) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_THAT(RunCommand(ctl + "status --job doomed").output,
              HasSubstr("name:       doomed, run r1, assembling"));
  // node-1's daemon refused the job's worker and reports it.
  auto reporter = client();
  const absl::Time reported = absl::Now();
  ASSERT_OK_AND_ASSIGN(
      bool failed,
      reporter->FailJob({"doomed", "r1"}, "node-1", 1,
                        absl::ResourceExhaustedError("the job needs 1 worker slots, but 0 of "
                                                     "this node's 1 are free"),
                        absl::Seconds(5)));
  EXPECT_TRUE(failed);
  join.join();
  EXPECT_EQ(joined.code(), absl::StatusCode::kAborted) << joined;
  EXPECT_THAT(joined.message(), HasSubstr("job 'doomed' run 'r1' failed on node 'node-1'"));
  EXPECT_LT(join_returned - reported, absl::Seconds(5));
  const std::string failure =
      "job 'doomed' run 'r1' failed on node 'node-1' (node rank 1): the job needs 1 worker "
      "slots, but 0 of this node's 1 are free";

  CommandResult jobs = RunCommand(ctl + "jobs");
  EXPECT_EQ(jobs.exit_code, 0) << jobs.output;
  EXPECT_THAT(jobs.output, ::testing::ContainsRegex("doomed +r1 +failed"));
  EXPECT_THAT(jobs.output, ::testing::ContainsRegex("steady +r1 +running"));
  EXPECT_THAT(jobs.output, HasSubstr("\n" + failure + "\n"));
  CommandResult status = RunCommand(ctl + "status --job doomed");
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_THAT(status.output, HasSubstr("name:       doomed, run r1, failed\n"));
  EXPECT_THAT(status.output, HasSubstr("failure:    " + failure + "\n"));
  CommandResult json = RunCommand(ctl + "status --json --job doomed");
  EXPECT_THAT(json.output, HasSubstr("\"state\": \"failed\""));
  EXPECT_THAT(json.output, HasSubstr("\"failure\": \"" + failure + "\""));
  CommandResult other = RunCommand(ctl + "status --job steady");
  EXPECT_THAT(other.output, HasSubstr("name:       steady, run r1, running\n"));
  EXPECT_THAT(other.output, Not(HasSubstr("failure:")));
  // A second report changes nothing; a rejoin of the failed run is refused with the failure.
  ASSERT_OK_AND_ASSIGN(bool again, reporter->FailJob({"doomed", "r1"}, "node-1", 1,
                                                     absl::InternalError("later"),
                                                     absl::Seconds(5)));
  EXPECT_FALSE(again);
  EXPECT_THAT(RunCommand(ctl + "status --job doomed").output, Not(HasSubstr("later")));
  auto late = client();
  daemon::JoinInfo late_info{"node-1", 1, 1, 2, "address-blob"};
  late_info.job = {"doomed", "r1"};
  EXPECT_THAT(late->Join(late_info), StatusIs(absl::StatusCode::kAborted, HasSubstr(failure)));
  // A job refused on its first node, before any of its nodes joined, is listed as failed too.
  ASSERT_OK_AND_ASSIGN(failed, reporter->FailJob({"stillborn", "r7"}, "node-1", 1,
                                                 absl::FailedPreconditionError(
                                                     "this daemon serves --jobs a,b only"),
                                                 absl::Seconds(5)));
  EXPECT_TRUE(failed);
  jobs = RunCommand(ctl + "jobs");
  EXPECT_THAT(jobs.output, ::testing::ContainsRegex("stillborn +r7 +failed +0/0"));
  EXPECT_THAT(jobs.output, HasSubstr("job 'stillborn' run 'r7' failed on node 'node-1' (node "
                                     "rank 1): this daemon serves --jobs a,b only\n"));
  EXPECT_THAT(RunCommand(ctl + "status --job stillborn").output,
              HasSubstr("name:       stillborn, run r7, failed\n"));

  steady->Shutdown();
  ASSERT_OK_AND_ASSIGN(int exit_status, StopController(controller));
  EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0)
      << ReadFile(controller.log_file);
  EXPECT_THAT(ReadFile(controller.log_file), HasSubstr(failure));
  RunCommand("rm -rf " + dir);
}

}  // namespace
}  // namespace gravac::ctl
