// FtRankAnswers from the compact answer (the group's own part of the
// quorum) against FtRankAnswers from the whole quorum, on random quorums in
// the real address format.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <memory>
#include <random>
#include <set>
#include <string>

#include "base/ft_wire/host_port.h"
#include "launcher/cli/text.h"
#include "launcher/ft/group_sync.h"
#include "rendezvous/machine/quorum_lookup.h"

namespace ctrun::launcher {
namespace {

// A random quorum of `world` groups of `parts` nodes with `nproc` ranks
// each: IPv4 and IPv6 hosts, distinct ports, steps at the max or behind.
std::shared_ptr<const rdzv::Quorum> RandomGroups(std::mt19937& rng, int world, int nproc, int parts) {
  rdzv::Quorum q{.id = 1 + static_cast<int64_t>(rng() % 1000), .members = {}};
  const int64_t max_step = 50 + static_cast<int64_t>(rng() % 50);
  uint16_t port = 1024;
  const int anchor = static_cast<int>(rng() % static_cast<unsigned>(world));
  for (int g = 0; g < world; ++g) {
    std::string address;
    for (int node = 0; node < parts; ++node) {
      const std::string host = rng() % 2 ? fmt::format("10.0.{}.{}", g, node) : fmt::format("[fd00::{}:{}]", g, node);
      address += fmt::format("{}{}|", node == 0 ? "" : ";", host);
      for (int l = 0; l < nproc; ++l, port += 2) address += fmt::format("{}{}/{}", l == 0 ? "" : ",", port, port + 1);
    }
    const bool behind = g != anchor && rng() % 3 == 0;  // the anchor is at the max step: there is one
    q.members.push_back({.id = fmt::format("group-{:04}", g),  // sorted by id
                         .step = behind ? max_step - 1 - static_cast<int64_t>(rng() % 5) : max_step,
                         .address = address, .commit_failures = static_cast<int64_t>(rng() % 2)});
  }
  return std::make_shared<const rdzv::Quorum>(std::move(q));
}

rdzv::SyncAnswer WholeAnswer(std::shared_ptr<const rdzv::Quorum> q, std::optional<bool> commit) {
  return rdzv::SyncAnswer{.group = "", .commit = commit, .quorum = std::move(q)};
}

// The compact answer the client holds: the part, and a quorum of the id alone.
rdzv::SyncAnswer CompactAnswer(const rdzv::QuorumLookup& lookup, const std::string& group, size_t sources,
                               std::optional<bool> commit) {
  std::optional<rdzv::CompactPart> part = lookup.PartOf(group, sources);
  REQUIRE(part);
  return rdzv::SyncAnswer{
      .group = group, .commit = commit,
      .quorum = std::make_shared<const rdzv::Quorum>(rdzv::Quorum{.id = lookup.quorum().id, .members = {}}),
      .part = rdzv::OwnedPart(*part, lookup.quorum())};
}

// Rank r's heal address of every member at the max step.
std::set<std::string> UpToDateHealAddresses(const rdzv::Quorum& q, int r) {
  std::set<std::string> out;
  for (const auto& m : q.members) {
    if (m.step != q.max_step()) continue;
    std::vector<std::string_view> nodes = Split(m.address, ';');
    int rank = 0;
    for (std::string_view node : nodes) {
      const size_t bar = node.find('|');
      for (std::string_view entry : Split(node.substr(bar + 1), ',')) {
        if (rank++ == r) {
          const std::string_view heal = entry.substr(entry.find('/') + 1);
          out.insert(std::string(node.substr(0, bar)) + ":" + std::string(heal));
        }
      }
    }
  }
  return out;
}

TEST_CASE("compact answers: every rank's line equals the whole quorum's when every source is listed, and starts "
          "with an up-to-date source when fewer are",
          "[ft][group]") {
  std::mt19937 rng(45);
  int compared = 0, cut = 0;
  for (int round = 0; round < 150; ++round) {
    const int world = 1 + static_cast<int>(rng() % 9);
    const int nproc = 1 + static_cast<int>(rng() % 3);
    const int parts = 1 + static_cast<int>(rng() % 3);
    auto q = RandomGroups(rng, world, nproc, parts);
    const rdzv::QuorumLookup lookup(q);
    size_t up_to_date = 0;
    for (const auto& m : q->members) up_to_date += m.step == q->max_step() ? 1 : 0;
    const std::optional<bool> commit = rng() % 2 ? std::optional<bool>(rng() % 2 == 1) : std::nullopt;
    for (const auto& me : q->members) {
      for (int part = 0; part < parts; ++part) {
        INFO("round " << round << ", group " << me.id << ", part " << part << " of " << parts << ", nproc " << nproc);
        Result<std::vector<ft_wire::QuorumLine>> whole = FtRankAnswers(WholeAnswer(q, commit), me.id, nproc, part, parts);
        REQUIRE(whole.ok());
        // As many sources as the quorum has up-to-date members, or more
        // (what the agent asks is usually more): the same lines exactly.
        for (size_t asked : {up_to_date, up_to_date + 1 + rng() % 4, size_t{FtCompactSources(nproc, parts)}}) {
          if (asked < up_to_date) continue;
          Result<std::vector<ft_wire::QuorumLine>> compact =
              FtRankAnswers(CompactAnswer(lookup, me.id, asked, commit), me.id, nproc, part, parts);
          REQUIRE(compact.ok());
          CHECK(*compact == *whole);
          ++compared;
        }
        if (up_to_date < 2) continue;
        // Fewer: every rank heals from an up-to-date member first (its own
        // assigned one when its rank is below the count), the rest unchanged.
        const size_t asked = 1 + rng() % (up_to_date - 1);
        Result<std::vector<ft_wire::QuorumLine>> compact =
            FtRankAnswers(CompactAnswer(lookup, me.id, asked, commit), me.id, nproc, part, parts);
        REQUIRE(compact.ok());
        REQUIRE(compact->size() == whole->size());
        for (size_t l = 0; l < compact->size(); ++l) {
          ft_wire::QuorumLine c = (*compact)[l];
          const ft_wire::QuorumLine& w = (*whole)[l];
          const int r = part * nproc + static_cast<int>(l);
          CHECK(c.heal_sources.empty() == w.heal_sources.empty());
          if (!c.heal_sources.empty()) {
            CHECK(c.heal_sources.size() == asked);
            CHECK(UpToDateHealAddresses(*q, r).count(c.heal_sources.front()) == 1);
            if (static_cast<size_t>(r) < asked) CHECK(c.heal_sources.front() == w.heal_sources.front());
            ++cut;
          }
          c.heal_sources = w.heal_sources;
          CHECK(c == w);
        }
      }
    }
  }
  CHECK(compared > 1000);  // the rounds did compare, healing groups included
  CHECK(cut > 50);
}

TEST_CASE("FtCompactSources: one per rank of the group and two alternates, bounded", "[ft][group]") {
  CHECK(FtCompactSources(1, 1) == 3);
  CHECK(FtCompactSources(8, 1) == 10);
  CHECK(FtCompactSources(8, 4) == 34);
  CHECK(FtCompactSources(kFtMaxLocalRanks, kFtMaxGroupNodes) == kFtMaxCompactSources);
  CHECK(FtCompactSources(1 << 30, 1 << 30) == kFtMaxCompactSources);
  CHECK(FtCompactSources(0, -1) == 3);
}

rdzv::SyncAnswer PartAnswer(rdzv::QuorumPart part) {
  return rdzv::SyncAnswer{.group = "b", .commit = std::nullopt,
                          .quorum = std::make_shared<const rdzv::Quorum>(rdzv::Quorum{.id = 9, .members = {}}),
                          .part = std::move(part)};
}

TEST_CASE("a compact answer reads only its neighbour's and sources' addresses, and refuses a part it cannot use",
          "[ft][group]") {
  const rdzv::QuorumMember right{.id = "c", .step = 10, .address = "10.0.0.3|1200/2200,1201/2201",
                                 .commit_failures = 0};
  const rdzv::QuorumMember source{.id = "a", .step = 10, .address = "10.0.0.1|1000/2000,1001/2001",
                                  .commit_failures = 0};
  const rdzv::QuorumPart heals{.rank = 1, .world = 3, .max_step = 10, .right = right, .heal = true, .serve = false,
                               .sources = {source, right}, .members = {}};
  Result<std::vector<ft_wire::QuorumLine>> a = FtRankAnswers(PartAnswer(heals), "b", 2);
  REQUIRE(a.ok());
  CHECK((*a)[0] == ft_wire::QuorumLine{.commit = std::nullopt, .quorum_id = 9, .replica_rank = 1,
                                       .replica_world = 3, .max_step = 10, .right_host = "10.0.0.3",
                                       .right_port = 1200, .heal_sources = {"10.0.0.1:2000", "10.0.0.3:2200"},
                                       .serve = false});
  CHECK((*a)[1].heal_sources == std::vector<std::string>{"10.0.0.3:2201", "10.0.0.1:2001"});

  rdzv::QuorumPart no_right = heals;
  no_right.right.reset();
  CHECK_THAT(FtRankAnswers(PartAnswer(no_right), "b", 2).status().message(), Catch::Contains("no ring neighbour"));
  rdzv::QuorumPart no_sources = heals;
  no_sources.sources.clear();
  CHECK_THAT(FtRankAnswers(PartAnswer(no_sources), "b", 2).status().message(), Catch::Contains("names no source"));
  rdzv::QuorumPart unreadable = heals;
  unreadable.sources[1].address = "10.0.0.3|1200/2200,x/2201";
  CHECK_THAT(FtRankAnswers(PartAnswer(unreadable), "b", 2).status().message(), Catch::Contains("cannot read"));
  rdzv::QuorumPart small = heals;
  small.right->address = "10.0.0.3|1200/2200";
  CHECK_THAT(FtRankAnswers(PartAnswer(small), "b", 2).status().message(), Catch::Contains("same number"));
  // A group that does not heal reads no source; a quorum of one has no neighbour.
  rdzv::QuorumPart alone{.rank = 0, .world = 1, .max_step = 3, .right = std::nullopt, .heal = false, .serve = false,
                         .sources = {}, .members = {}};
  Result<std::vector<ft_wire::QuorumLine>> one = FtRankAnswers(PartAnswer(alone), "b", 2);
  REQUIRE(one.ok());
  CHECK((*one)[1].right_host.empty());
  CHECK((*one)[1].heal_sources.empty());
}

}  // namespace
}  // namespace ctrun::launcher
