// PreemptCheck: no collective when preemption is off; otherwise this rank's
// view of the notice file, MAX-reduced with the other ranks' (a fake group
// that plays the peers' flag), and a failed all-reduce as Unavailable.
#include <ATen/ATen.h>
#include "tests/trainer/catch_after_torch.h"
#include "tests/trainer/done_work.h"
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <stdexcept>
#include <string>

#include "trainer/checkpoint/preempt_check.h"

namespace ct = ctrun::trainer;
using ctrun::trainer::testing::DoneWork;

namespace {

// Rank 0 of two; the other rank's flag is `peer_flag`. Counts the max
// all-reduces; any other collective is a test failure.
class PeerFlagComm : public ct::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string backend() const override { return "fake"; }
  c10::intrusive_ptr<c10d::Work> AllReduceMax(at::Tensor& tensor) override {
    ++max_calls;
    REQUIRE(tensor.numel() == 1);
    tensor.fill_(std::max(tensor.item<int>(), peer_flag));
    return c10::make_intrusive<DoneWork>(fail);
  }
  c10::intrusive_ptr<c10d::Work> AllReduceSum(at::Tensor&) override { throw std::logic_error("unexpected sum"); }
  c10::intrusive_ptr<c10d::Work> Broadcast(std::vector<at::Tensor>&, int) override {
    throw std::logic_error("unexpected broadcast");
  }
  c10::intrusive_ptr<c10d::Work> Barrier() override { throw std::logic_error("unexpected barrier"); }

  int peer_flag = 0;
  bool fail = false;
  int max_calls = 0;
};

struct NoticeDir {
  NoticeDir() {
    char tmpl[] = "/tmp/ctrun-preempt-check-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    notice = dir + "/preempt.json";
  }
  ~NoticeDir() {
    ::unlink(notice.c_str());
    ::rmdir(dir.c_str());
  }
  std::string dir, notice;
};

}  // namespace

TEST_CASE("PreemptCheck: off without CTRUN_PREEMPT_FILE, and then no collective at all") {
  PeerFlagComm comm;
  comm.peer_flag = 1;
  ct::PreemptCheck check(ct::PreemptEnv{}, comm, at::Device(at::kCPU));
  CHECK_FALSE(check.enabled());
  auto due = check.Due();
  REQUIRE(due.ok());
  CHECK_FALSE(*due);
  CHECK(comm.max_calls == 0);
}

TEST_CASE("PreemptCheck: due when this rank or another one sees the notice") {
  NoticeDir files;
  PeerFlagComm comm;
  ct::PreemptCheck check(ct::PreemptEnv{.notice_file = files.notice, .saved_file = ""}, comm,
                         at::Device(at::kCPU));
  REQUIRE(check.enabled());
  auto none = check.Due();
  REQUIRE(none.ok());
  CHECK_FALSE(*none);

  comm.peer_flag = 1;  // another rank saw it first
  auto peer = check.Due();
  REQUIRE(peer.ok());
  CHECK(*peer);

  comm.peer_flag = 0;
  std::ofstream(files.notice) << "{\"deadline_unix_s\": 1790000000.5, \"budget_s\": 20.0, \"source\": \"SIGUSR1\"}\n";
  auto own = check.Due();
  REQUIRE(own.ok());
  CHECK(*own);
  CHECK(comm.max_calls == 3);  // one all-reduce per boundary
}

TEST_CASE("PreemptCheck: a failed all-reduce is Unavailable, naming the flag") {
  NoticeDir files;
  PeerFlagComm comm;
  comm.fail = true;
  ct::PreemptCheck check(ct::PreemptEnv{.notice_file = files.notice, .saved_file = ""}, comm,
                         at::Device(at::kCPU));
  auto due = check.Due();
  REQUIRE_FALSE(due.ok());
  CHECK(due.status().IsUnavailable());
  CHECK(due.status().message().find("preemption flag") != std::string::npos);
}
