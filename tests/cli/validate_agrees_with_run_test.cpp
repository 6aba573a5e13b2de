// `mlsim validate` rejects everything `mlsim run` would: every shipped scenario, its base and
// each of its variants, with bad overrides for its model (zero, negative and huge quantities,
// wrong types, unknown keys, impossible combinations). For each, validate must fail with an
// InputError naming the expected JSON path (exit status 2 in the program), and run must fail
// with the very same message before it simulates. In-process through the CLI's own commands;
// one case goes through the built program to check the exit statuses and what it prints.
//
// The test fails when a model checks an input only once it runs (in start(), or mid-run): then
// validate accepts what run rejects. It also fails when a scenario of a model without a list of
// bad overrides below is shipped, so a new model gets its cases.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/registry.hpp"
#include "sim_core/base/error.hpp"
#include "tests/support/program_runner.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mlsim;
using mlsim::testing::run_mlsim;
using mlsim::testing::TempDir;

namespace {

const std::filesystem::path kScenarios =
    std::filesystem::path(MLSIM_SOURCE_DIR) / "workloads/scenarios";
// The other folder of shipped scenarios (serving studies).
const std::filesystem::path kServingScenarios =
    std::filesystem::path(MLSIM_SOURCE_DIR) / "workloads/serving";

// Overrides applied together, and a text the error message must contain (the JSON path).
struct BadInput {
  std::vector<std::string> sets;
  std::string expected_in_message;
};

// For every scenario, whatever its model.
const std::vector<BadInput> kAnyModel = {
    {{"system.no_such_key=1"}, "system.no_such_key: unknown key"},
    {{"workload.no_such_key=1"}, "workload"},  // unknown key, or a model without a workload
    {{"system.model=no_such_model"}, "system.model"},
    {{"network.backend=no_such_backend"}, "network.backend"},
    {{"seed=-1"}, "seed"},
    {{"seed=\"one\""}, "seed"},
};

const std::map<std::string, std::vector<BadInput>> kByModel = {
    {"collectives",
     {
         {{"system.bytes=-1B"}, "system.bytes"},
         {{"system.bytes=64"}, "system.bytes"},  // a number, not a size with a unit
         {{"system.chunks=0"}, "system.chunks"},
         {{"system.window=-1"}, "system.window"},
         {{"system.algorithm=allgather"}, "system.algorithm"},
         {{"system.participants=100000"}, "system.participants"},
         {{"system.algorithm=tree", "system.arity=0"}, "system.arity"},
         {{"system.participants=-1"}, "system.participants"},
         {{"system.algorithm=ring", "events.list=[{\"link\": [\"h0\", \"h1\"], \"up\": false}]"},
          "events.list[0].link"},  // not neighbours
         {{"system.channels=0"}, "system.channels"},
         {{"system.costs.launch=-1us"}, "system.costs.launch"},
         {{"system.costs.protocols.LL.efficiency=0"}, "system.costs.protocols.LL.efficiency"},
         {{"system.host.message_overhead=-1us"}, "system.host.message_overhead"},
     }},
    {"ina",
     {
         // Too small for one aggregator: only the built switch finds this (the case).
         {{"system.aggregator_memory=100B"}, "system.aggregator_memory"},
         {{"system.aggregator_memory=0B"}, "system.aggregator_memory"},
         {{"system.aggregator_memory=-1KiB"}, "system.aggregator_memory"},
         {{"system.aggregator_memory=1000000TB"}, "system.aggregator_memory"},
         // (SwitchML's cases on one switch: the two_level variants refuse SwitchML first.)
         {{"system.policy=switchml", "system.levels=one_switch", "system.aggregator_memory=1KiB"},
          "system.aggregator_memory"},
         {{"system.policy=switchml", "system.levels=one_switch", "system.switchml.partitions=1"},
          "system.switchml.partitions"},
         {{"system.burst_values=1000000"}, "system.aggregator_memory"},
         {{"system.burst_values=0"}, "system.burst_values"},
         {{"system.policy=sharp"}, "system.policy"},
         {{"system.switch=no-such-switch"}, "system.switch"},
         {{"system.loss_rate=0.9"}, "system.loss_rate"},
         {{"system.atp.timeout=0s"}, "system.atp.timeout"},
         {{"workload.jobs[0].workers=0"}, "workload.jobs[0].workers"},
         {{"workload.jobs[0].workers=33"}, "workload.jobs[0].workers"},
         {{"workload.jobs[0].iterations=\"many\""}, "workload.jobs[0].iterations"},
         {{"workload.jobs[0].profile=no_such_profile.txt"}, "workload.jobs[0].profile"},
         {{"workload.jobs[0].gpu=A100-SXM4-40GB"}, "workload.jobs[0].gpu"},  // topology.hardware
         {{"workload.profiled_on=K80"}, "workload.profiled_on"},
         {{"topology.hardware.gpu=no-such-gpu"}, "topology.hardware.gpu"},
         // The training core's scheduler, and jobs of two policies on one switch.
         {{"system.policy=atp", "system.scheduler=bytescheduler", "system.partition=10",
           "system.credit=1000"},
          "system.partition"},
         {{"system.scheduler=fifo", "system.partition=1000000"}, "system.partition"},
         {{"system.policy=switchml", "system.levels=one_switch", "system.scheduler=bytescheduler",
           "system.partition=1000000", "system.credit=1000000"},
          "system.scheduler"},
         {{"workload.jobs[0].policy=atp", "workload.jobs[1].policy=dsa"}, "workload.jobs"},
         {{"workload.jobs[1].policy=switchml", "system.levels=one_switch",
           "system.switchml.memory=1MiB"},
          "system.switchml.memory"},
         {{"system.switchml.memory=1KiB"}, "system.switchml.memory"},
         // Who orders ByteScheduler's chunks: a known name (the bytescheduler variants), and
         // only under ByteScheduler (the fifo ones).
         {{"system.scheduling=\"sometimes\""}, "system.scheduling"},
         // Two-level aggregation: a known value, ATP and DSA only, on the network path.
         {{"system.levels=three"}, "system.levels"},
         {{"system.levels=two_level", "system.policy=switchml"}, "system.levels"},
         {{"system.levels=two_level", "system.data_path=packet"}, "system.levels"},
         {{"system.levels=two_level_ps_tor", "system.data_path=packet"}, "system.levels"},
         {{"system.levels=two_level_ps_tor", "system.policy=switchml"}, "system.levels"},
     }},
    {"llm_training",
     {
         {{"system.tp=0"}, "system.tp"},
         {{"system.tp=3"}, "system.tp"},    // does not divide the heads
         {{"system.tp=16"}, "system.tp"},   // a rank's GPUs span two 8-GPU hosts
         {{"system.pp=7"}, "system.pp"},    // 96 or 80 layers do not split into 7 stages
         {{"system.dp=128"}, "system.tp"},  // 16384 GPUs, more than the topology holds
         {{"system.global_batch=100"}, "system.global_batch"},
         {{"system.micro_batch=0"}, "system.micro_batch"},
         {{"system.communication=analytical"}, "system.communication"},
         {{"system.dp_sync=zero3"}, "system.dp_sync"},
         {{"system.recompute=1"}, "system.recompute"},
         {{"system.costs.launch=-1us"}, "system.costs.launch"},
         {{"workload.model.heads=0"}, "workload.model.heads"},
         {{"workload.model.architecture=mamba"}, "workload.model.architecture"},
         {{"workload.model.layers=0"}, "workload.model.layers"},
         {{"system.communication=network", "system.tp=4"},
          "system.tp"},  // DP pairs on a host
                         // The training core: a known name; every layout the graph runs
                         // (since 2026-12-07), refusing the graph's refusals at system.tp, and
                         // merged op steps with a TP group over hosts through the network at
                         // system.core; its options only with it.
         {{"system.core=tree"}, "system.core"},
         {{"system.core=training", "system.communication=network", "system.tp=4", "system.dp=16"},
          "system.tp"},
         {{"system.core=training", "system.communication=network", "system.tp=2", "system.dp=4",
           "topology.hardware.gpus_per_host=1", "system.collapse_tensor_parallel=false",
           "system.core_op_steps=merged"},
          "system.core"},
         // (On the graph: the shipped network variants run on the core, which takes them.)
         {{"system.core=graph", "system.stage_as_one_tensor=false"}, "system.stage_as_one_tensor"},
         {{"system.core=graph", "system.core_op_steps=merged"}, "system.core_op_steps"},
     }},
    {"pipeline",
     {
         {{"system.stages=0"}, "system.stages"},
         {{"system.stages=1000"}, "system.stages"},
         {{"system.policy=gpipe"}, "system.policy"},
         {{"system.min_gain=2"}, "system.min_gain"},
         {{"workload.minibatches=0"}, "workload.minibatches"},
         {{"workload.samples_per_minibatch=-1"}, "workload.samples_per_minibatch"},
         {{"workload.gpu_speed=[1, 2]"}, "workload.gpu_speed"},
         {{"events.list=[{\"at\": \"1s\", \"host\": 1000, \"speed\": 0.5}]"},
          "events.list[0].host"},
         {{"events.list=[{\"at\": \"1s\", \"host\": 0}]"}, "events.list[0]"},  // no change
         {{"workload.profile=no_such_profile.txt"}, "workload.profile"},
         {{"workload.profiled_on=K80"}, "workload.profiled_on"},
     }},
    {"embcache",
     {
         {{"system.cache_ratio=-0.1"}, "system.cache_ratio"},
         {{"system.cache_ratio=2"}, "system.cache_ratio"},
         {{"system.embedding_dim=0"}, "system.embedding_dim"},
         {{"system.policy=lfu"}, "system.policy"},
         {{"workload.batch_per_worker=0"}, "workload.batch_per_worker"},
         {{"workload.iterations=0"}, "workload.iterations"},
         {{"workload.compute_per_sample=-1us"}, "workload.compute_per_sample"},
         {{"workload.samples.fields=0"}, "workload.samples.fields"},
         {{"topology.hosts=1"}, "topology"},  // workers and a parameter server need two hosts
     }},
    {"commsched",
     {
         {{"system.partition=0"}, "system.partition"},
         {{"system.credit=-5"}, "system.credit"},
         {{"system.workers=0"}, "system.workers"},
         {{"system.servers=1000"}, "system.servers"},
         {{"system.scheduler=fifo", "system.tuner=grid_best"}, "system.tuner"},
         {{"system.mode=allreduce", "system.servers=2"}, "system.servers"},
         {{"system.tuner=magic"}, "system.tuner"},
         {{"system.message_overhead=-1us"}, "system.message_overhead"},
         {{"workload.iterations=0"}, "workload.iterations"},
         {{"workload.gpu=no-such-gpu"}, "workload.gpu"},  // moved to topology.hardware
         {{"workload.compute_scale=2"}, "workload.compute_scale"},
         {{"workload.profiled_on=K80"}, "workload.profiled_on"},
         {{"topology.hardware.gpu=no-such-gpu"}, "topology.hardware.gpu"},
         {{"events.list=[{\"at\": \"1s\", \"all_links\": true, \"bandwidth\": \"0Gbps\"}]"},
          "events.list[0].bandwidth"},
     }},
    {"cluster",
     {
         {{"system.reference_gpu=no-such-gpu"}, "system.reference_gpu"},
         {{"system.nodes=[]"}, "system.nodes"},  // moved to topology.hardware
         {{"topology.hardware.gpus_per_host=0"}, "topology.hardware.gpus_per_host"},
         {{"topology.hardware.gpu=no-such-gpu"}, "topology.hardware.gpu"},
         {{"system.speed_dtype=fp8"}, "system.reference_gpu"},  // the reference V100 has no FP8
         {{"system.policy=sjf"}, "system.policy"},
         {{"system.startup_warm=100h"}, "system.startup_warm"},
         {{"system.series_interval=0s"}, "system.series_interval"},
         {{"system.estimate_factor=0.5"}, "system.estimate_factor"},
         {{"workload.jobs.file=no_such_trace.csv"}, "workload.jobs.file"},
         // A trace's missing column is named at its file; where the jobs are listed (variant
         // dsa_excerpt of cluster_ina_two_racks), the column key is unknown there.
         {{"workload.jobs.gpus_column=no_such_column"}, "workload.jobs."},
         // The detailed mode's stall watchdog: a positive duration, and only in that mode.
         {{"system.stall_timeout=\"0s\""}, "system.stall_timeout"},
         {{"system.stall_timeout=5"}, "system.stall_timeout"},
         {{"system.detail=\"job\"", "system.stall_timeout=\"5s\""}, "system.stall_timeout"},
     }},
    {"serving",
     {
         {{"system.gpu_memory_utilization=0"}, "system.gpu_memory_utilization"},
         {{"system.scheduler=fastest"}, "system.scheduler"},
         {{"system.router=random"}, "system.router"},
         {{"system.block_tokens=0"}, "system.block_tokens"},
         {{"system.max_batch_tokens=0"}, "system.max_batch_tokens"},
         {{"system.family=[]"}, "system.family"},
         {{"system.gpu=A100-SXM4-80GB"}, "system.gpu"},  // moved to topology.hardware
         {{"system.allreduce_latency=10us"}, "system.allreduce_latency"},  // to system.costs
         {{"topology.hardware.gpu=no-such-gpu"}, "topology.hardware.gpu"},
         // Weights that leave no room for a KV cache: only the built replicas find this.
         {{"system.gpu_memory_utilization=0.05"}, "leaves no room for a KV cache"},
         {{"workload.escalation_probability=2"}, "workload.escalation_probability"},
     }},
};

// Bad overrides of keys only one shipped scenario has (on top of its model's).
// A valid model pipeline chosen by a planner, and the start of a valid listed job of that model
// (left open for the case's own keys), for the planner cases of cluster_philly_fat_tree.json.
const std::string kDpPipeline =
    "workload.training.models[0].pipeline={\"planner\": \"dp\", \"schedule\": \"1f1b\", "
    "\"micro_batches\": 2}";
const std::string kListedJob =
    "{\"submit\": \"0s\", \"gpus\": 8, \"model\": \"vgg16_ring_fifo\", \"iterations\": 1";

// A Megatron model (docs/cluster.md, "Megatron jobs") in place of the Philly scenario's first
// model, `extra` spliced into its megatron object; and the roofline that prices its operators.
std::string megatron_model(const std::string& extra) {
  return "workload.training.models[0]={\"name\": \"gpt\", \"megatron\": {\"model\": "
         "{\"name\": \"t\", \"architecture\": \"gpt\", \"layers\": 2, \"hidden\": 256, "
         "\"heads\": 8, \"ffn\": 1024, \"vocab\": 1024, \"sequence\": 128}, \"pp\": 1, "
         "\"dp\": 2, \"micro_batch\": 1, \"global_batch\": 4" +
         extra + "}}";
}
const std::string kRoofline =
    "compute={\"providers\": [\"roofline\"], \"roofline\": "
    "\"../hardware/roofline_calibration.json\", \"scale_from\": \"A100-SXM4-80GB\"}";

const std::map<std::string, std::vector<BadInput>> kByFile = {
    {"cluster_ina_two_racks.json",
     {
         // Who orders ByteScheduler's chunks over in-network aggregation (its variants run fifo
         // and bytescheduler, ATP, DSA, SwitchML and ring: each rejects these by the same path).
         {{"workload.training.models[0].scheduling=\"sometimes\""},
          "workload.training.models[0].scheduling"},
         {{"workload.training.models[0].scheduler=\"fifo\"",
           "workload.training.models[0].scheduling=\"job\""},
          "workload.training.models[0].scheduling"},
         {{"workload.training.models[1].sync=\"ring\"",
           "workload.training.models[1].scheduler=\"bytescheduler\"",
           "workload.training.models[1].scheduling=\"job\""},
          "workload.training.models[1].scheduling"},
         // Pipeline stages: refused over in-network aggregation, a bad schedule elsewhere (the
         // ring, tree and rat variants): both under the model's pipeline path.
         {{"workload.training.models[0].pipeline={\"stages\": 2, \"schedule\": \"zigzag\", "
           "\"micro_batches\": 4}"},
          "workload.training.models[0].pipeline"},
     }},
    {"cluster_philly_fat_tree.json",
     {
         // Pipeline-parallel jobs (docs/cluster.md): strict keys and values, by their path.
         {{"workload.training.models[0].pipeline={\"stages\": 2, \"schedule\": \"zigzag\", "
           "\"micro_batches\": 4}"},
          "workload.training.models[0].pipeline.schedule"},
         {{"workload.training.models[0].pipeline={\"stages\": 0, \"schedule\": \"1f1b\", "
           "\"micro_batches\": 4}"},
          "workload.training.models[0].pipeline.stages"},
         {{"workload.training.models[0].pipeline={\"stages\": 2, \"schedule\": \"gpipe\"}"},
          "workload.training.models[0].pipeline.micro_batches"},
         {{"workload.training.models[0].pipeline={\"stages\": 2, \"schedule\": \"gpipe\", "
           "\"micro_batches\": 4, \"colour\": 1}"},
          "workload.training.models[0].pipeline.colour"},
         {{"workload.training.models[0].pipeline={\"stages\": 1000, \"schedule\": \"gpipe\", "
           "\"micro_batches\": 4}"},
          "workload.training.models[0].pipeline.stages"},
         // The stage planners (docs/cluster.md, "Stages: a planner of models/pipeline"): an
         // unknown name, stages beside a planner, straight without one; in a listed job, an
         // unknown name, stages above 1 under a planner, a planner for a model without a
         // pipeline, and the even split without a count. Each replaces the whole pipeline or
         // job list, so every variant (some set the pipeline, all read the trace) sees the same.
         {{"workload.training.models[0].pipeline={\"planner\": \"rl\", \"schedule\": "
           "\"1f1b\", \"micro_batches\": 2}"},
          "workload.training.models[0].pipeline.planner: unknown planner \"rl\""},
         {{"workload.training.models[0].pipeline={\"planner\": \"pipedream\", \"stages\": 2, "
           "\"schedule\": \"1f1b\", \"micro_batches\": 2}"},
          "workload.training.models[0].pipeline.stages: the planner \"pipedream\" chooses"},
         {{"workload.training.models[0].pipeline={\"stages\": 2, \"schedule\": \"1f1b\", "
           "\"micro_batches\": 2, \"straight\": true}"},
          "workload.training.models[0].pipeline.straight"},
         {{kDpPipeline, "workload.jobs={\"source\": \"list\", \"list\": [" + kListedJob +
                            ", \"planner\": \"greedy\"}]}"},
          "workload.jobs.list[0].planner: unknown planner \"greedy\""},
         {{kDpPipeline, "workload.jobs={\"source\": \"list\", \"list\": [" + kListedJob +
                            ", \"planner\": \"exact\", \"stages\": 2}]}"},
          "workload.jobs.list[0].stages: the planner \"exact\" chooses"},
         {{kDpPipeline, "workload.jobs={\"source\": \"list\", \"list\": [" + kListedJob +
                            "}, {\"submit\": \"0s\", \"gpus\": 8, \"model\": "
                            "\"resnet50_ring_bytescheduler\", \"iterations\": 1, \"planner\": "
                            "\"dp\"}]}"},
          "workload.jobs.list[1].planner: model 'resnet50_ring_bytescheduler' has no pipeline"},
         {{kDpPipeline, "workload.jobs={\"source\": \"list\", \"list\": [" + kListedJob +
                            ", \"planner\": \"even\"}]}"},
          "workload.jobs.list[0].planner: the even split needs a stage count"},
         // Megatron jobs: the llm_training keys checked at their path under the model's
         // megatron object, what a cluster job does not take, and a listed job's GPUs.
         {{megatron_model(", \"tp\": 3")}, "workload.training.models[0].megatron.tp"},
         {{megatron_model(", \"tp\": 4, \"colour\": 1")},
          "workload.training.models[0].megatron.colour"},
         {{megatron_model(", \"tp\": 4, \"communication\": \"closed_form\"")},
          "workload.training.models[0].megatron.communication: a cluster job's collectives"},
         {{megatron_model(", \"tp\": 4, \"iterations\": 2")},
          "workload.training.models[0].megatron.iterations"},
         {{megatron_model(", \"tp\": 8")},
          "workload.training.models[0].megatron.tp: no host has 8 GPUs"},
         {{megatron_model(", \"tp\": 4"), kRoofline,
           "workload.jobs={\"source\": \"list\", \"list\": [{\"submit\": \"0s\", \"gpus\": "
           "6, \"model\": \"gpt\", \"iterations\": 1}]}"},
          "workload.jobs.list[0].gpus: model 'gpt' is a Megatron model of tp x pp = 4 GPUs a "
          "replica: 6 GPUs"},
         {{megatron_model(", \"tp\": 4"), kRoofline,
           "workload.jobs={\"source\": \"list\", \"list\": [{\"submit\": \"0s\", \"gpus\": "
           "12, \"model\": \"gpt\", \"iterations\": 1}]}"},
          "workload.jobs.list[0].gpus: model 'gpt' is a Megatron model whose global batch of 4 "
          "sequences does not split"},
     }},
    {"elastic_multiworld.json",
     {
         {{"system.separate[0].elastic.process_groups=\"two_worlds\""},
          "system.separate[0].elastic.process_groups"},
         {{"system.separate[0].elastic.stages=[{\"layers\": 40}]"},
          "system.separate[0].elastic.stages"},
         {{"system.separate[0].elastic.polling_overhead=\"-1us\""},
          "system.separate[0].elastic.polling_overhead"},
         {{"system.separate[0].elastic.weight_load=\"0GB/s\""},
          "system.separate[0].elastic.weight_load"},
         {{"system.separate[0].elastic.watchdog.update_period=\"0s\""},
          "system.separate[0].elastic.watchdog.update_period"},
         {{"system.separate[0].elastic.scale=[{\"at\": \"1s\", \"stage\": 5, \"add\": 1}]"},
          "system.separate[0].elastic.scale[0].stage"},
         {{"system.separate[0].elastic.scale_in=\"gently\""},
          "system.separate[0].elastic.scale_in"},
         {{"system.separate[0].elastic.drain_timeout=\"0s\""},
          "system.separate[0].elastic.drain_timeout"},
         {{"system.separate[0].elastic.kv_migration=1"}, "system.separate[0].elastic.kv_migration"},
         {{"system.separate[0].elastic.autoscaler={\"stage\": 1, \"signal\": \"latency\", "
           "\"scale_out_above\": 4}"},
          "system.separate[0].elastic.autoscaler.signal"},
         {{"system.separate[0].elastic.autoscaler={\"stage\": 1, \"signal\": "
           "\"slo_attainment\", \"scale_out_below\": 0.9, \"scale_in_above\": 0.5}"},
          "system.separate[0].elastic.autoscaler.scale_in_above"},
         {{"system.separate[0].elastic.no_such_key=1"}, "system.separate[0].elastic.no_such_key"},
         // Every other elastic key (each with a whole object or array where the variants differ,
         // so that the one bad value is what every variant sees).
         {{"system.separate[0].elastic.stage_router=\"fastest\""},
          "system.separate[0].elastic.stage_router"},
         {{"system.separate[0].elastic.rebalance=\"round_robin\""},
          "system.separate[0].elastic.rebalance"},
         {{"system.separate[0].elastic.rebalance=1"}, "system.separate[0].elastic.rebalance"},
         {{"system.separate[0].elastic.poll_step=\"-1us\""},
          "system.separate[0].elastic.poll_step"},
         {{"system.separate[0].elastic.poll_step=5"}, "system.separate[0].elastic.poll_step"},
         {{"system.separate[0].elastic.stages=[]"}, "system.separate[0].elastic.stages"},
         {{"system.separate[0].elastic.stages=[{\"layers\": 0}, {\"layers\": 80}]"},
          "system.separate[0].elastic.stages[0].layers"},
         {{"system.separate[0].elastic.stages=[{\"layers\": 40, \"replicas\": 0}, {\"layers\": "
           "40}]"},
          "system.separate[0].elastic.stages[0].replicas"},
         {{"system.separate[0].elastic.stages=[{\"layers\": 40}, {\"layers\": 40, \"replicas\": "
           "-1}]"},
          "system.separate[0].elastic.stages[1].replicas"},
         {{"system.separate[0].elastic.stages=[{\"layers\": 40}, {\"layers\": 40, \"replicas\": 2, "
           "\"max_replicas\": 1}]"},
          "system.separate[0].elastic.stages[1].max_replicas"},
         {{"system.separate[0].elastic.stages=[{\"layers\": 40}, {\"layers\": 40, \"gpus\": 4}]"},
          "system.separate[0].elastic.stages[1].gpus"},
         {{"system.separate[0].elastic.polling_overhead=100"},
          "system.separate[0].elastic.polling_overhead"},
         {{"system.separate[0].elastic.world_creation=\"-1s\""},
          "system.separate[0].elastic.world_creation"},
         {{"system.separate[0].elastic.weight_load=\"fast\""},
          "system.separate[0].elastic.weight_load"},
         {{"system.separate[0].elastic.watchdog={\"updates_per_check\": 0}"},
          "system.separate[0].elastic.watchdog.updates_per_check"},
         {{"system.separate[0].elastic.watchdog={\"tick\": \"1s\"}"},
          "system.separate[0].elastic.watchdog.tick"},
         {{"system.separate[0].elastic.virtual_engines=-1"},
          "system.separate[0].elastic.virtual_engines"},
         {{"system.separate[0].elastic.scale=[{\"at\": \"1s\", \"stage\": 1, \"add\": 0}]"},
          "system.separate[0].elastic.scale[0].add"},
         {{"system.separate[0].elastic.scale=[{\"at\": \"soon\", \"stage\": 1, \"add\": 1}]"},
          "system.separate[0].elastic.scale[0].at"},
         {{"system.separate[0].elastic.scale=[{\"at\": \"1s\", \"stage\": 1, \"add\": 1, \"why\": "
           "1}]"},
          "system.separate[0].elastic.scale[0].why"},
         {{"system.separate[0].elastic.scale={\"at\": \"1s\"}"},
          "system.separate[0].elastic.scale"},
         {{"system.separate[0].elastic.drain_timeout=\"-5s\""},
          "system.separate[0].elastic.drain_timeout"},
         {{"system.separate[0].elastic.autoscaler=1"}, "system.separate[0].elastic.autoscaler"},
         {{"system.separate[0].elastic.autoscaler={\"stage\": 5, \"scale_out_above\": 4}"},
          "system.separate[0].elastic.autoscaler.stage"},
         {{"system.separate[0].elastic.autoscaler={\"stage\": 1, \"interval\": \"0s\", "
           "\"scale_out_above\": 4}"},
          "system.separate[0].elastic.autoscaler.interval"},
         {{"system.separate[0].elastic.autoscaler={\"stage\": 1}"},
          "system.separate[0].elastic.autoscaler.scale_out_above"},
         {{"system.separate[0].elastic.autoscaler={\"stage\": 1, \"scale_out_above\": 4, "
           "\"scale_in_below\": 8}"},
          "system.separate[0].elastic.autoscaler.scale_in_below"},
         {{"system.separate[0].elastic.autoscaler={\"stage\": 1, \"signal\": \"slo_attainment\"}"},
          "system.separate[0].elastic.autoscaler.scale_out_below"},
         {{"system.separate[0].elastic.autoscaler={\"stage\": 1, \"signal\": \"slo_attainment\", "
           "\"scale_out_below\": 1.5}"},
          "system.separate[0].elastic.autoscaler.scale_out_below"},
         {{"system.separate[0].elastic.autoscaler={\"stage\": 1, \"scale_out_above\": 4, "
           "\"min_replicas\": 0}"},
          "system.separate[0].elastic.autoscaler.min_replicas"},
         {{"system.separate[0].elastic.autoscaler={\"stage\": 1, \"scale_out_above\": 4, "
           "\"cooldown\": \"-1s\"}"},
          "system.separate[0].elastic.autoscaler.cooldown"},
         {{"system.separate[0].elastic.autoscaler={\"stage\": 1, \"scale_out_above\": 4, "
           "\"scale_out_below\": 0.5}"},
          "system.separate[0].elastic.autoscaler.scale_out_below"},
         {{"system.separate[0].pp=2"}, "system.separate[0].pp"},
         {{"system.separate[0].replicas=2"}, "system.separate[0].replicas"},
     }},
};

struct Outcome {
  bool ok = false;
  std::string message;  // the InputError, as the program prints it after "error: "
};

template <typename Command>
Outcome outcome_of(Command&& command) {
  try {
    command();
    return {true, ""};
  } catch (const InputError& e) {
    return {false, e.what()};
  }
}

ScenarioArgs args_for(const std::filesystem::path& file, const std::optional<std::string>& variant,
                      const std::vector<std::string>& sets) {
  ScenarioArgs a;
  a.scenario = file.string();
  a.variant = variant;
  a.sets = sets;
  return a;
}

struct Shipped {
  std::filesystem::path file;
  std::string model;
  std::vector<std::optional<std::string>> variants;  // nullopt: the base scenario
  bool needs_shared_data = false;
};

std::vector<Shipped> shipped_scenarios() {
  std::vector<Shipped> out;
  for (const auto& folder : {kScenarios, kServingScenarios})
    for (const auto& entry : std::filesystem::directory_iterator(folder)) {
      const std::filesystem::path& path = entry.path();
      if (path.extension() != ".json") continue;
      std::ifstream in(path);
      const std::string text((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
      const auto doc = nlohmann::json::parse(text);
      Shipped s{path, doc.at("system").at("model").get<std::string>(), {std::nullopt}, false};
      if (doc.contains("variants"))
        for (const auto& [name, _] : doc["variants"].items()) s.variants.emplace_back(name);
      s.needs_shared_data = text.find("shared/data") != std::string::npos;
      out.push_back(std::move(s));
    }
  std::sort(out.begin(), out.end(),
            [](const Shipped& a, const Shipped& b) { return a.file < b.file; });
  return out;
}

bool shared_data_present() {
  return std::filesystem::exists(std::filesystem::path(MLSIM_SHARED_DATA_DIR) / "llm_traces");
}

std::string describe(const Shipped& s, const std::optional<std::string>& variant,
                     const std::vector<std::string>& sets) {
  std::string d = s.file.filename().string();
  if (variant) d += " --variant " + *variant;
  for (const auto& set : sets) d += " --set '" + set + "'";
  return d;
}

}  // namespace

TEST(ValidateAgreesWithRun, EveryShippedScenarioAndVariantRejectsBadOverridesBeforeRunning) {
  const Registries registries = make_registries();
  const TempDir tmp;
  const bool have_shared = shared_data_present();
  int checked = 0, skipped = 0;
  for (const Shipped& s : shipped_scenarios()) {
    if (s.needs_shared_data && !have_shared) {
      ++skipped;
      continue;
    }
    const auto model_cases = kByModel.find(s.model);
    ASSERT_NE(model_cases, kByModel.end())
        << s.file << ": model \"" << s.model << "\" has no bad overrides in this test";
    for (const auto& variant : s.variants) {
      // The scenario itself is valid; then each bad input must be rejected by both commands.
      const Outcome good =
          outcome_of([&] { return validate_command(args_for(s.file, variant, {}), registries); });
      ASSERT_TRUE(good.ok) << describe(s, variant, {}) << ": " << good.message;
      std::vector<BadInput> cases = model_cases->second;
      if (!variant) cases.insert(cases.end(), kAnyModel.begin(), kAnyModel.end());
      if (const auto own = kByFile.find(s.file.filename().string()); own != kByFile.end())
        cases.insert(cases.end(), own->second.begin(), own->second.end());
      for (const BadInput& bad : cases) {
        const std::string what = describe(s, variant, bad.sets);
        const Outcome validated = outcome_of(
            [&] { return validate_command(args_for(s.file, variant, bad.sets), registries); });
        // A bad input that validate accepts is the failure this test exists for; running it to
        // see whether run agrees would cost a whole simulation, so stop here.
        if (validated.ok) {
          ADD_FAILURE() << what << ": validate accepts it";
          continue;
        }
        EXPECT_NE(validated.message.find(bad.expected_in_message), std::string::npos)
            << what << ": " << validated.message;
        RunArgs run;
        run.input = args_for(s.file, variant, bad.sets);
        run.out = (tmp.path() / "out").string();
        run.quiet = true;
        const Outcome ran = outcome_of([&] { return run_command(run, registries); });
        EXPECT_FALSE(ran.ok) << what << ": run accepts it";
        EXPECT_EQ(ran.message, validated.message) << what;
        EXPECT_FALSE(std::filesystem::exists(tmp.path() / "out")) << what << ": run wrote results";
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0);
  if (skipped > 0) std::cout << "skipped " << skipped << " scenario(s) that need ../shared/data\n";
}

// The example through the program: same message, exit status 2 from both commands.
TEST(ValidateAgreesWithRun, TheProgramExitsTwoForATooSmallAggregatorMemory) {
  TempDir dir;
  const std::string file = (kScenarios / "ina_dsa_study.json").string();
  const std::string set = " --set system.aggregator_memory=100B";
  const auto validated = run_mlsim(dir, "validate " + file + set);
  const auto ran = run_mlsim(dir, "run " + file + set + " --out " + (dir.path() / "r").string());
  EXPECT_EQ(validated.status, 2) << validated.out << validated.err;
  EXPECT_EQ(ran.status, 2) << ran.out << ran.err;
  EXPECT_EQ(validated.err,
            "error: --set: system.aggregator_memory: too little memory for one "
            "aggregator\n");
  EXPECT_EQ(ran.err, validated.err);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "r"));
}

// An elastic key through the program: exit status 2 from both commands, the JSON path in the
// message, and no results written.
TEST(ValidateAgreesWithRun, TheProgramExitsTwoForABadElasticKey) {
  if (!shared_data_present()) GTEST_SKIP() << "needs ../shared/data";
  TempDir dir;
  const std::string file = (kServingScenarios / "elastic_multiworld.json").string();
  const std::string set = " --set 'system.separate[0].elastic.stage_router=\"fastest\"'";
  const auto validated = run_mlsim(dir, "validate " + file + set);
  const auto ran = run_mlsim(dir, "run " + file + set + " --out " + (dir.path() / "r").string());
  EXPECT_EQ(validated.status, 2) << validated.out << validated.err;
  EXPECT_EQ(ran.status, 2) << ran.out << ran.err;
  EXPECT_NE(validated.err.find("error: --set: system.separate[0].elastic.stage_router: unknown "
                               "stage_router \"fastest\""),
            std::string::npos)
      << validated.err;
  EXPECT_EQ(ran.err, validated.err);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "r"));
}

// A Megatron model's key through the program: exit status 2 from both commands, the JSON path in
// the message, and no results written.
TEST(ValidateAgreesWithRun, TheProgramExitsTwoForABadMegatronKey) {
  TempDir dir;
  const std::string file = (kScenarios / "cluster_philly_fat_tree.json").string();
  const std::string sets =
      " --variant detailed_megatron --set "
      "'workload.training.models[4].megatron.tp=3'";
  const auto validated = run_mlsim(dir, "validate " + file + sets);
  const auto ran = run_mlsim(dir, "run " + file + sets + " --out " + (dir.path() / "r").string());
  EXPECT_EQ(validated.status, 2) << validated.out << validated.err;
  EXPECT_EQ(ran.status, 2) << ran.out << ran.err;
  EXPECT_EQ(validated.err.rfind("error: --set: workload.training.models[4].megatron.tp: tensor "
                                "parallel degree 3 must divide",
                                0),
            0u)
      << validated.err;
  EXPECT_EQ(ran.err, validated.err);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "r"));
}

// An unknown `megatron.core` (the graph or the training core runs a Megatron model's jobs):
// exit status 2 from both commands, the JSON path in the message, nothing written.
TEST(ValidateAgreesWithRun, TheProgramExitsTwoForAnUnknownMegatronCore) {
  TempDir dir;
  const std::string file = (kScenarios / "cluster_philly_fat_tree.json").string();
  const std::string sets =
      " --variant detailed_megatron --set "
      "'workload.training.models[4].megatron.core=\"tree\"'";
  const auto validated = run_mlsim(dir, "validate " + file + sets);
  const auto ran = run_mlsim(dir, "run " + file + sets + " --out " + (dir.path() / "r").string());
  EXPECT_EQ(validated.status, 2) << validated.out << validated.err;
  EXPECT_EQ(ran.status, 2) << ran.out << ran.err;
  EXPECT_EQ(validated.err.rfind("error: --set: workload.training.models[4].megatron.core: ", 0), 0u)
      << validated.err;
  EXPECT_NE(validated.err.find("tree"), std::string::npos) << validated.err;
  EXPECT_EQ(ran.err, validated.err);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "r"));
}

// A stage planner's key through the program: exit status 2 from both commands, the JSON path in
// the message, and no results written (a planner beside stages, and a listed job's unknown one).
TEST(ValidateAgreesWithRun, TheProgramExitsTwoForABadPlannerKey) {
  TempDir dir;
  const std::string file = (kScenarios / "cluster_philly_fat_tree.json").string();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" --set 'workload.training.models[0].pipeline={\"planner\": \"pipedream\", \"stages\": "
       "2, \"schedule\": \"1f1b\", \"micro_batches\": 2}'",
       "error: --set: workload.training.models[0].pipeline.stages: the planner \"pipedream\" "
       "chooses the stages and their replicas over the job's hosts\n"},
      {" --set '" + kDpPipeline + "' --set 'workload.jobs={\"source\": \"list\", \"list\": [" +
           kListedJob + ", \"planner\": \"greedy\"}]}'",
       "error: --set: workload.jobs.list[0].planner: unknown planner \"greedy\""},
      // A memory limit no configuration of VGG16's stages fits (docs/cluster.md).
      {" --set '" + kDpPipeline +
           "' --set 'workload.training.models[0].pipeline.memory={\"constraint\": true, "
           "\"capacity\": \"1MB\"}'",
       "error: --set: workload.training.models[0].pipeline.memory.capacity: no configuration"},
  };
  for (const auto& [sets, expected] : cases) {
    const auto validated = run_mlsim(dir, "validate " + file + sets);
    const auto ran = run_mlsim(dir, "run " + file + sets + " --out " + (dir.path() / "r").string());
    EXPECT_EQ(validated.status, 2) << sets << validated.out << validated.err;
    EXPECT_EQ(ran.status, 2) << sets << ran.out << ran.err;
    EXPECT_EQ(validated.err.rfind(expected, 0), 0u) << sets << validated.err;
    EXPECT_EQ(ran.err, validated.err) << sets;
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "r")) << sets;
  }
}
