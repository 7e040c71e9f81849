#include "verifier/plan/plan.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tests/support/drill_report_fixture.h"

namespace ckpt {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kDay = 24 * 3600.0;

// 10 GiB parameters, 10 GiB gradients, 40 GiB AdamW state (two moments), 20 GiB activations.
DrillMeasurements big_model() {
  DrillMeasurements m;
  m.parameter_bytes = 10 * kGiB;
  m.gradient_bytes = 10 * kGiB;
  m.optimizer_state_bytes = 40 * kGiB;
  m.activation_bytes_estimate = 20 * kGiB;
  m.checkpoint_save_seconds = 60;
  return m;
}

Accelerator eighty_gib() {
  Accelerator a;
  a.name = "80 GiB device";
  a.memory_bytes = 80 * kGiB;
  a.runtime_overhead_bytes = 2 * kGiB;
  return a;
}

TEST(Plan, YoungDalyIntervalAndOverhead) {
  // sqrt(2 * 60 * 86400) = sqrt(10368000); 3220^2 = 10368400, so 3220 - 400 / (2 * 3220) = 3219.938.
  EXPECT_NEAR(young_daly_interval_seconds(60, kDay), 3219.938, 1e-3);
  // At the optimum both terms equal sqrt(C / (2 MTBF)) = sqrt(60 / 172800) = 0.0186339: sum 0.0372678.
  EXPECT_NEAR(checkpoint_overhead_fraction(60, 3219.938, kDay), 0.0372678, 1e-6);
  // Away from the optimum it costs more: interval 600 s -> 60/600 + 600/172800 = 0.1 + 0.0034722.
  EXPECT_NEAR(checkpoint_overhead_fraction(60, 600, kDay), 0.1034722, 1e-6);
}

TEST(Plan, DoesNotFitOneDeviceButFitsWithFsdp) {
  const MemoryFit fit = fit_memory(big_model(), eighty_gib(), 0.10, 8);
  // Peak = 10 + 10 + 40 + 20 = 80 GiB; replica = (80 + 2) * 1.1 = 90.2 GiB > 80 GiB.
  EXPECT_NEAR(fit.peak_bytes / kGiB, 80.0, 1e-9);
  EXPECT_NEAR(fit.replica_bytes / kGiB, 90.2, 1e-9);
  EXPECT_FALSE(fit.replica_fits);
  // FSDP over 2: (60 / 2 + 20 + 2) * 1.1 = 57.2 GiB <= 80 GiB.
  EXPECT_EQ(fit.fsdp_devices, 2);
  EXPECT_NEAR(fit.fsdp_bytes_per_device / kGiB, 57.2, 1e-9);
}

TEST(Plan, ActivationsThatCannotBeShardedDoNotFitAnyNode) {
  DrillMeasurements m = big_model();
  m.activation_bytes_estimate = 80 * kGiB;
  // Even over 8: (60 / 8 + 80 + 2) * 1.1 = 98.45 GiB > 80 GiB.
  const MemoryFit fit = fit_memory(m, eighty_gib(), 0.10, 8);
  EXPECT_FALSE(fit.replica_fits);
  EXPECT_EQ(fit.fsdp_devices, 0);
}

TEST(Plan, CudaReservedPeakWinsOverTheAttribution) {
  DrillMeasurements m = big_model();
  m.cuda_max_reserved_bytes = 50 * kGiB;
  // Replica = (50 + 2) * 1.1 = 57.2 GiB fits 80 GiB.
  const MemoryFit fit = fit_memory(m, eighty_gib(), 0.10, 8);
  EXPECT_NEAR(fit.peak_bytes / kGiB, 50.0, 1e-9);
  EXPECT_NEAR(fit.replica_bytes / kGiB, 57.2, 1e-9);
  EXPECT_TRUE(fit.replica_fits);
  // Headroom is applied: at 60% the same replica needs 52 * 1.6 = 83.2 GiB and no longer fits.
  EXPECT_FALSE(fit_memory(m, eighty_gib(), 0.60, 8).replica_fits);
}

TEST(Plan, RunTimeCountsStepsEvalsAndCheckpoints) {
  DrillMeasurements m;
  m.step_seconds = 0.5;
  m.data_wait_seconds = 0.1;
  m.eval_seconds = 30;
  m.eval_every_steps = 100;
  m.checkpoint_save_seconds = 60;
  // 1000 * (0.5 + 0.1) + (1000 / 100) * 30 = 600 + 300 = 900 s; interval 3219.938 s -> 1 checkpoint.
  RunTime run = estimate_run_time(m, 1000, 1.0, kDay);
  EXPECT_EQ(run.evaluations, 10);
  EXPECT_NEAR(run.compute_seconds, 900.0, 1e-9);
  EXPECT_EQ(run.checkpoints, 1);
  EXPECT_NEAR(run.checkpoint_seconds, 60.0, 1e-9);
  // Rework = 900 * 3219.938 / 172800 = 16.7705 s.
  EXPECT_NEAR(run.rework_seconds, 16.7705, 1e-4);
  // Twice as fast a device halves step and eval but not the data wait: 1000 * 0.35 + 10 * 15 = 500 s.
  run = estimate_run_time(m, 1000, 2.0, kDay);
  EXPECT_NEAR(run.compute_seconds, 500.0, 1e-9);
}

// 40 h around training: download 10, preprocess 20, validation 5, export 3, copy-out 2.
PipelineHours forty_hours() {
  return PipelineHours{10, 20, 5, 3, 2};
}

std::vector<Reservation> pass_and_month() {
  return {Reservation{"7-day pass", 168, 8, 1.0}, Reservation{"30-day reservation", 720, 8, 0.8}};
}

DrillMeasurements one_second_steps() {
  DrillMeasurements m;
  m.step_seconds = 1.0;
  m.checkpoint_save_seconds = 60;
  return m;
}

TEST(Plan, LongPipelineNeedsTheThirtyDayReservation) {
  // 432000 one-second steps = 120 h; ceil(432000 / 3219.938) = 135 checkpoints * 60 s = 2.25 h;
  // rework 432000 * 3219.938 / 172800 s = 2.23607 h; total 40 + 120 + 2.25 + 2.23607 = 164.48607 h.
  // With 20% margin that is 197.38 h > 168 h, so the 30-day (720 h) reservation:
  // margin (720 - 164.48607) / 164.48607 = 3.37727, useful work 120 / 164.48607 = 0.729545.
  const RunTime run = estimate_run_time(one_second_steps(), 432000, 1.0, kDay);
  EXPECT_EQ(run.checkpoints, 135);
  const PipelineBudget budget = pipeline_budget(forty_hours(), run);
  EXPECT_NEAR(budget.total_hours, 164.48607, 1e-4);
  EXPECT_NEAR(budget.useful_work_fraction, 0.729545, 1e-5);
  const ReservationChoice choice = choose_reservation(budget, pass_and_month(), 0.20, 2.0);
  ASSERT_TRUE(choice.found);
  EXPECT_EQ(choice.reservation.name, "30-day reservation");
  EXPECT_NEAR(choice.margin_fraction, 3.37727, 1e-4);
  // 720 h * 8 GPUs * $2 * 0.8 = $9216.
  EXPECT_NEAR(choice.cost_usd, 9216.0, 1e-6);
}

TEST(Plan, ShorterPipelineFitsTheSevenDayPass) {
  // 216000 s = 60 h; 68 checkpoints = 1.13333 h; rework 1.11803 h; total 102.25137 h;
  // * 1.2 = 122.70 h <= 168 h. Margin (168 - 102.25137) / 102.25137 = 0.643010.
  const PipelineBudget budget =
      pipeline_budget(forty_hours(), estimate_run_time(one_second_steps(), 216000, 1.0, kDay));
  EXPECT_NEAR(budget.total_hours, 102.25137, 1e-4);
  const ReservationChoice choice = choose_reservation(budget, pass_and_month(), 0.20, 2.0);
  ASSERT_TRUE(choice.found);
  EXPECT_EQ(choice.reservation.name, "7-day pass");
  EXPECT_NEAR(choice.margin_fraction, 0.643010, 1e-5);
}

TEST(Plan, NoReservationHoldsAPipelineBeyondTheMargin) {
  PipelineBudget budget;
  budget.total_hours = 650;  // * 1.2 = 780 h > 720 h
  EXPECT_FALSE(choose_reservation(budget, pass_and_month(), 0.20, 2.0).found);
  budget.total_hours = 600;  // * 1.2 = 720 h: exactly enough
  EXPECT_TRUE(choose_reservation(budget, pass_and_month(), 0.20, 2.0).found);
}

TEST(Plan, ParsesADrillReportAndNamesWhatIsMissing) {
  auto m = parse_drill_measurements(drill_report(), "r.json");
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ(m->step_seconds, 0.5);
  EXPECT_EQ(m->eval_every_steps, 100);
  EXPECT_FALSE(m->cuda_max_reserved_bytes.has_value());

  nlohmann::json with_cuda = drill_report();
  with_cuda["measurements"]["memory"]["cuda"] = {{"max_memory_allocated_bytes", 1},
                                                 {"max_memory_reserved_bytes", 7}};
  m = parse_drill_measurements(with_cuda, "r.json");
  ASSERT_TRUE(m.is_ok());
  EXPECT_EQ(*m->cuda_max_reserved_bytes, 7.0);

  // What a CPU-only drill writes: the CUDA section is present and null.
  nlohmann::json cpu_only = drill_report();
  cpu_only["measurements"]["memory"]["cuda"] = nullptr;
  m = parse_drill_measurements(cpu_only, "r.json");
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_FALSE(m->cuda_max_reserved_bytes.has_value());

  nlohmann::json missing = drill_report();
  missing["measurements"]["timings"].erase("checkpoint_save_seconds");
  m = parse_drill_measurements(missing, "r.json");
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("measurements.timings"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("checkpoint_save_seconds"), std::string::npos);

  nlohmann::json negative = drill_report();
  negative["measurements"]["memory"]["parameter_bytes"] = -1;
  EXPECT_FALSE(parse_drill_measurements(negative, "r.json").is_ok());
  EXPECT_FALSE(parse_drill_measurements(nlohmann::json::array(), "r.json").is_ok());
}

// What a drill of any program writes (run_measurements.h): nulls for what it did not measure, a
// sampled RSS per rank instead of an activation estimate, and where each value came from.
nlohmann::json outside_report() {
  nlohmann::json r = drill_report();
  auto& mem = r["measurements"]["memory"];
  mem["activation_bytes_estimate"] = nullptr;
  mem["rss_before_bytes"] = nullptr;
  mem["peak_rss_bytes"] = 8e9;
  mem["peak_rss_bytes_per_rank"] = 4e9;
  auto& t = r["measurements"]["timings"];
  t["data_wait_seconds_mean"] = nullptr;
  t["eval_seconds"] = nullptr;
  t["tokens_per_second"] = nullptr;
  r["measurements"]["eval_every_steps"] = nullptr;
  r["measurements"]["sources"] = {{"step_seconds_mean", "measured: between step lines"},
                                  {"gradient_bytes", "assumed: = parameter_bytes"}};
  return r;
}

TEST(Plan, NullIsNotMeasuredAndEveryFigureNamesItsSource) {
  auto m = parse_drill_measurements(outside_report(), "r.json");
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ(m->data_wait_seconds, 0);
  EXPECT_EQ(m->eval_every_steps, 0);
  EXPECT_EQ(m->sources.at("data_wait_seconds_mean"), "not measured");
  EXPECT_EQ(m->sources.at("step_seconds_mean"), "measured: between step lines");
  EXPECT_EQ(m->sources.at("restore_seconds"), "measured");  // a report without a source for it
  // No activation estimate: the peak is the sampled resident set of one rank.
  PeakMemory peak = peak_memory(*m);
  EXPECT_EQ(peak.bytes, 4e9);
  EXPECT_EQ(peak.source.rfind("measured: resident set per rank sampled", 0), 0u) << peak.source;
  // The program's own peak of one full step wins over the sampled one.
  nlohmann::json reported = outside_report();
  reported["measurements"]["memory"]["peak_memory_bytes"] = 3e9;
  m = parse_drill_measurements(reported, "r.json");
  ASSERT_TRUE(m.is_ok());
  peak = peak_memory(*m);
  EXPECT_EQ(peak.bytes, 3e9);
  EXPECT_EQ(peak.source.rfind("reported by the program", 0), 0u) << peak.source;

  HardwareCatalog catalog;
  catalog.accelerators.push_back(Accelerator{"X", 80e9, 1e9, 1, 2, 0, ""});
  catalog.reservations = pass_and_month();
  PlanSettings settings;
  settings.total_steps = 1000;
  const nlohmann::json plan = make_plan(*m, catalog, settings);
  EXPECT_EQ(plan["sources"]["peak_memory"], peak.source);
  EXPECT_EQ(plan["sources"]["data_wait_seconds"], "not measured");
  EXPECT_EQ(plan["sources"]["relative_speed"].get<std::string>().rfind("assumed", 0), 0u);
  EXPECT_NE(plan_table(plan).find("where the figures come from:"), std::string::npos);
}

TEST(Plan, StepAndSaveTimeMustBeMeasured) {
  for (const char* key : {"step_seconds_mean", "checkpoint_save_seconds"}) {
    nlohmann::json r = outside_report();
    r["measurements"]["timings"][key] = nullptr;
    auto m = parse_drill_measurements(r, "r.json");
    ASSERT_FALSE(m.is_ok()) << key;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(m.status().message().find(std::string("'") + key + "' is null"), std::string::npos)
        << m.status().message();
  }
}

TEST(Plan, RestoresAfterFailuresAreBudgeted) {
  // 86400 one-second steps with MTBF 1 day: one expected failure, so one 600 s restore.
  DrillMeasurements m = one_second_steps();
  m.restore_seconds = 600;
  const RunTime run = estimate_run_time(m, 86400, 1.0, kDay);
  EXPECT_NEAR(run.restart_seconds, 600, 1e-9);
  const PipelineBudget with = pipeline_budget(forty_hours(), run);
  const PipelineBudget without =
      pipeline_budget(forty_hours(), estimate_run_time(one_second_steps(), 86400, 1.0, kDay));
  EXPECT_NEAR(with.restart_hours, 600.0 / 3600, 1e-12);
  EXPECT_NEAR(with.total_hours - without.total_hours, 600.0 / 3600, 1e-12);
}

}  // namespace
}  // namespace ckpt
