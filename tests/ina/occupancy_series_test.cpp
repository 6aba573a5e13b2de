// The aggregator occupancy time series: exact interval averages, computed by hand.
#include <gtest/gtest.h>

#include "models/ina/ina_cluster.hpp"
#include "sim_core/base/interval_average.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::ina;
using namespace mlsim::ina::testing;

// Width 10 ns; the value is 0 until 5, 2 until 25, then 1; read at 32.
// [0,10): (0*5 + 2*5)/10 = 1; [10,20): 2; [20,30): (2*5 + 1*5)/10 = 1.5; [30,32): 1.
TEST(InaOccupancySeries, IntervalAveragesAreExact) {
  IntervalAverage a(Time::ns(10));
  a.set(Time::zero(), 0);
  a.set(Time::ns(5), 2);
  a.set(Time::ns(25), 1);
  EXPECT_EQ(a.averages(Time::ns(32)), (std::vector<double>{1, 2, 1.5, 1}));
  EXPECT_EQ(a.averages(Time::ns(30)), (std::vector<double>{1, 2, 1.5}));  // reading is repeatable
  a.set(Time::ns(40), 0);
  EXPECT_EQ(a.averages(Time::ns(40)), (std::vector<double>{1, 2, 1.5, 1}));
}

// The two-worker case of mechanisms_test.cpp: the only aggregator is held (and complete) from
// 2,000,925 to 2,002,375 ns, the run ends at 2,002,900. With 1 ms intervals: [0, 1 ms) and
// [1 ms, 2 ms) empty; [2 ms, 2,002,900) held 1,450 of 2,900 ns = 0.5, all of it idle-reserved.
TEST(InaOccupancySeries, ClusterReportsOccupancyPerInterval) {
  Engine engine;
  ClusterParams p = one_aggregator(PolicyKind::kAtp);
  p.occupancy_interval = Time::ms(1);
  p.jobs.push_back(job(one_layer(1.0, 1.0, 62), 2, 1));
  InaCluster cluster(engine, p);
  cluster.start();
  engine.run();
  ASSERT_TRUE(cluster.all_finished());
  Results r;
  cluster.report(r);
  ASSERT_EQ(r.series().size(), 1u);
  const TimeSeries& s = r.series()[0];
  EXPECT_EQ(s.name, "aggregator_occupancy");
  ASSERT_EQ(s.rows.size(), 3u);
  EXPECT_EQ(s.rows[2].first, Time::ms(2));
  EXPECT_EQ(s.rows[0].second, (std::vector<double>{0, 0}));
  EXPECT_EQ(s.rows[1].second, (std::vector<double>{0, 0}));
  EXPECT_DOUBLE_EQ(s.rows[2].second[0], 0.5);
  EXPECT_DOUBLE_EQ(s.rows[2].second[1], 0.5);
  // Without an interval, no series.
  Engine engine2;
  p.occupancy_interval = Time::zero();
  InaCluster plain(engine2, p);
  plain.start();
  engine2.run();
  Results r2;
  plain.report(r2);
  EXPECT_TRUE(r2.series().empty());
}
