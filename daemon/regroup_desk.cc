#include "daemon/regroup_desk.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/absl_compat.h"
#include "core/ipc/framing.h"
#include "daemon/control/controller_client.h"

namespace gravac::daemon {

RegroupDesk::~RegroupDesk() {
  for (auto& [key, g] : groups_) {
    if (g->client != nullptr) g->client->Shutdown();
  }
  for (auto& [key, g] : groups_) {
    if (g->thread.joinable()) g->thread.join();
  }
}

void RegroupDesk::Send(int fd, const v1::DaemonMessage& msg) {
  (void)ipc::SendFrame(fd, msg.SerializeAsString(), {}, absl::Seconds(1));
}

void RegroupDesk::Take(ipc::UniqueFd fd, const v1::Hello& hello) {
  const JobId job = JobId{hello.job_name(), hello.run_id()}.Normalized();
  auto refuse = [&](const absl::Status& why) {
    GRAVAC_LOG(*log_, kWarning, "refused a regroup (pid %d): %s", hello.pid(), why.message());
    v1::DaemonMessage msg;
    msg.mutable_error()->set_code(static_cast<int>(why.code()));
    msg.mutable_error()->set_message(std::string(why.message()));
    Send(fd.get(), msg);
  };
  const std::string who = absl::StrFormat("node '%s': regroup of local rank %d of %s",
                                          options_.node_name, hello.local_rank(), job.ToString());
  if (hello.local_size() < 1 || hello.local_size() > 65536 || hello.local_rank() < 0 ||
      hello.local_rank() >= hello.local_size() || hello.from_version() < -1) {
    refuse(absl::InvalidArgumentError(absl::StrFormat(
        "%s: local rank %d of %d from membership %d is malformed", who, hello.local_rank(),
        hello.local_size(), hello.from_version())));
    return;
  }
  std::unique_ptr<Group>& slot = groups_[{job, hello.from_version()}];
  if (slot != nullptr && slot->done) {
    if (slot->thread.joinable()) slot->thread.join();
    slot.reset();
  }
  if (slot == nullptr) {
    slot = std::make_unique<Group>();
    slot->job = job;
    slot->from_version = hello.from_version();
    slot->local_size = hello.local_size();
    slot->min_size = hello.min_size();
    slot->max_size = hello.max_size();
    slot->expect_nodes.assign(hello.expect_nodes().begin(), hello.expect_nodes().end());
    slot->gather_until = absl::Now() + kLocalGather;
  }
  Group& g = *slot;
  if (g.started) {
    refuse(absl::FailedPreconditionError(absl::StrFormat(
        "%s: this node already asked the controller for the membership after %d without this "
        "worker (it came after %s)",
        who, g.from_version, absl::FormatDuration(kLocalGather))));
    return;
  }
  if (hello.local_size() != g.local_size ||
      std::any_of(g.workers.begin(), g.workers.end(),
                  [&](const Worker& w) { return w.local_rank == hello.local_rank(); })) {
    refuse(absl::InvalidArgumentError(absl::StrFormat(
        "%s: local rank %d of %d conflicts with the workers already regrouping here (local "
        "size %d)",
        who, hello.local_rank(), hello.local_size(), g.local_size)));
    return;
  }
  g.workers.push_back({std::move(fd), hello.local_rank(), hello.pid()});
  if (static_cast<int>(g.workers.size()) == g.local_size) Start(g);
}

void RegroupDesk::Tick(absl::Time now) {
  for (auto it = groups_.begin(); it != groups_.end();) {
    Group& g = *it->second;
    if (!g.started && now >= g.gather_until) Start(g);
    if (g.done) {
      if (g.thread.joinable()) g.thread.join();
      it = groups_.erase(it);
    } else {
      ++it;
    }
  }
}

void RegroupDesk::Start(Group& g) {
  g.started = true;
  std::sort(g.workers.begin(), g.workers.end(),
            [](const Worker& a, const Worker& b) { return a.local_rank < b.local_rank; });
  absl::StatusOr<std::unique_ptr<ControllerClient>> client =
      ControllerClient::Create({.address = options_.controller,
                                .security = options_.security,
                                .join_timeout = options_.join_timeout,
                                .log = log_});
  if (!client.ok()) {
    v1::DaemonMessage msg;
    msg.mutable_error()->set_code(static_cast<int>(client.status().code()));
    msg.mutable_error()->set_message(std::string(client.status().message()));
    for (Worker& w : g.workers) Send(w.fd.get(), msg);
    g.workers.clear();
    g.done = true;
    return;
  }
  g.client = *std::move(client);
  GRAVAC_LOG(*log_, kInfo,
             "node '%s': %s: %d of %d local workers ask for the membership after %d", 
             options_.node_name, g.job.ToString(), static_cast<int>(g.workers.size()),
             g.local_size, g.from_version);
  g.thread = std::thread([this, &g] { Answer(g); });
}

void RegroupDesk::Answer(Group& g) {
  const int local = static_cast<int>(g.workers.size());
  absl::StatusOr<MembershipResult> m = g.client->Regroup({.job = g.job,
                                                          .node_name = options_.node_name,
                                                          .local_count = local,
                                                          .from_version = g.from_version,
                                                          .min_size = g.min_size,
                                                          .max_size = g.max_size,
                                                          .expect_nodes = g.expect_nodes});
  if (!m.ok()) {
    GRAVAC_LOG(*log_, kError, "node '%s': %s", options_.node_name, m.status().message());
    v1::DaemonMessage msg;
    msg.mutable_error()->set_code(static_cast<int>(m.status().code()));
    msg.mutable_error()->set_message(std::string(m.status().message()));
    for (Worker& w : g.workers) Send(w.fd.get(), msg);
  } else {
    GRAVAC_LOG(*log_, kInfo,
               "node '%s': %s: membership %d (run '%s'): node %d of %d, ranks [%d, %d) of %d; "
               "lost: %s; added: %s",
               options_.node_name, g.job.ToString(), m->version, m->run_id, m->node_rank,
               m->nodes, m->first_rank, m->first_rank + local, m->world_size,
               m->lost_nodes.empty() ? "none" : absl::StrJoin(m->lost_nodes, ", "),
               m->added_nodes.empty() ? "none" : absl::StrJoin(m->added_nodes, ", "));
    for (int i = 0; i < local; ++i) {
      v1::DaemonMessage msg;
      v1::Placement* p = msg.mutable_placement();
      p->set_version(m->version);
      p->set_run_id(m->run_id);
      p->set_rank(m->first_rank + i);
      p->set_size(m->world_size);
      p->set_local_rank(i);
      p->set_local_size(local);
      p->set_node_rank(m->node_rank);
      p->set_nodes(m->nodes);
      for (const std::string& n : m->lost_nodes) p->add_lost_nodes(n);
      for (const std::string& n : m->added_nodes) p->add_added_nodes(n);
      Send(g.workers[i].fd.get(), msg);
    }
  }
  g.client->Shutdown();
  g.workers.clear();  // closes the connections
  g.done = true;
}

}  // namespace gravac::daemon
