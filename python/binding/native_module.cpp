// ckptcheck._native: the Python binding over the public C++ API (api/ckptcheck.h), never the CLI.
// Each function takes plain values, releases the GIL for the whole engine call (hashing runs on the
// library's own threads, as the CLI's does) and returns the JSON text the CLI prints with --json;
// the package (python/ckptcheck/) turns it into result objects. A failed call raises one of the
// package's exceptions (ckptcheck/errors.py), chosen by what the Status says: a refused option is a
// UsageError (a ValueError), damage a DamageError, anything else a ReadError (an OSError). Nothing
// the library does can end the interpreter: every C++ exception is caught here and raised as Error.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/ckptcheck.h"

namespace py = pybind11;

namespace {

// The Python names of VerifyOptions' fields, where they differ: a library message quotes the field
// (`allowed_globals`), the user passed the keyword (allow_globals=).
const std::pair<const char*, const char*> kKeywordOfField[] = {
    {"`allowed_globals`", "`allow_globals`"}, {"`pubkey_path`", "`pubkey`"}, {"`key_path`", "`key`"}};

std::string with_keywords(std::string message) {
  for (const auto& [field, keyword] : kKeywordOfField) {
    for (size_t at = message.find(field); at != std::string::npos; at = message.find(field, at))
      message.replace(at, std::string(field).size(), keyword);
  }
  return message;
}

[[noreturn]] void raise_error(const char* kind, const std::string& message, int exit_code) {
  py::object errors = py::module_::import("ckptcheck.errors");
  PyErr_SetObject(errors.attr(kind).ptr(), py::make_tuple(message, exit_code).ptr());
  throw py::error_already_set();
}

[[noreturn]] void raise_status(const ckptcheck::Status& status) {
  const std::string message = with_keywords(status.message());
  if (status.invalid_argument()) raise_error("UsageError", message, 2);
  if (status.damage()) raise_error("DamageError", message, 1);
  raise_error("ReadError", message, 2);
}

// Runs `call` without the GIL; a Status becomes an exception, a C++ exception an Error.
template <typename Call>
auto without_gil(const char* what, Call&& call) -> decltype(call()) {
  std::string failure;
  {
    py::gil_scoped_release released;
    try {
      return call();
    } catch (const std::exception& e) {
      failure = std::string(what) + ": internal error: " + e.what();
    } catch (...) {
      failure = std::string(what) + ": internal error";
    }
  }
  raise_error("Error", failure, 2);
}

std::string verify(const std::string& path, bool weights_only, const std::vector<std::string>& allow_globals,
                   const std::string& pubkey, size_t jobs, bool quick) {
  ckptcheck::VerifyOptions options;
  options.weights_only = weights_only;
  options.allowed_globals = allow_globals;
  options.pubkey_path = pubkey;
  options.jobs = jobs;
  options.quick = quick;
  auto result = without_gil("verify", [&] { return ckptcheck::verify(path, options); });
  if (!result.ok()) raise_status(result.status());
  return result->json;
}

// The file ckptcheck.torch.save has torch.save write by name (torch's own stream: no copy of any
// byte), hashed as it grows (the library's HashingFileTail); finish() after torch.save returns.
class HashingTail {
 public:
  explicit HashingTail(const std::string& path) {
    auto created = ckptcheck::HashingFileTail::create(path);
    if (!created.ok()) raise_status(created.status());
    tail_ = std::move(created).value();
  }
  void finish() {
    ckptcheck::Status finished = without_gil("finish", [&] { return tail_->finish(); });
    if (!finished.ok()) raise_status(finished);
  }
  const ckptcheck::HashingFileTail* tail() const { return tail_.get(); }

 private:
  std::unique_ptr<ckptcheck::HashingFileTail> tail_;
};

std::string seal(const std::string& path, const std::string& key, size_t jobs,
                 const std::vector<const HashingTail*>& written) {
  ckptcheck::SealOptions options;
  options.key_path = key;
  options.jobs = jobs;
  for (const HashingTail* file : written) options.written.push_back(file->tail());
  auto result = without_gil("seal", [&] { return ckptcheck::seal(path, options); });
  if (!result.ok()) raise_status(result.status());
  // The object `ckptcheck seal --json` prints.
  return nlohmann::json{{"seal", result->seal_path},
                        {"files", result->files},
                        {"tensors", result->tensors},
                        {"bytes", result->bytes},
                        {"unread", result->unread}}
      .dump();
}

std::string inspect(const std::string& path, bool stats, const std::string& tensor) {
  ckptcheck::InspectOptions options;
  options.stats = stats;
  options.tensor = tensor;
  auto result = without_gil("inspect", [&] { return ckptcheck::inspect(path, options); });
  if (!result.ok()) raise_status(result.status());
  return result->json;
}

std::string diff(const std::string& a, const std::string& b, double rtol, double atol) {
  ckptcheck::DiffOptions options;
  options.rtol = rtol;
  options.atol = atol;
  auto result = without_gil("diff", [&] { return ckptcheck::diff(a, b, options); });
  if (!result.ok()) raise_status(result.status());
  return result->json;
}

// The drill's run from the CKPTCHECK_* environment (the one parser, verifier/drill/program_contract.h):
// None outside a drill, else a dict of its fields.
py::object drill_run() {
  auto run = ckptcheck::drill_run_from_environment();
  if (!run.ok()) raise_status(ckptcheck::Status::invalid_argument(run.status().message()));
  if (!run->under_drill) return py::none();
  py::dict d;
  d["role"] = run->role;
  d["ckpt_dir"] = run->ckpt_dir;
  d["steps"] = run->steps;
  d["save_every"] = run->save_every;
  d["metrics"] = run->metrics;
  d["resume"] = run->resume;
  return d;
}

// The contract's metrics lines, written by the library's one writer (flushed line by line).
class MetricsFile {
 public:
  explicit MetricsFile(const std::string& path) : log_(path) {
    if (!log_.status().ok()) raise_status(log_.status());
  }
  void step(int64_t step, const std::vector<std::pair<std::string, double>>& values) {
    ckptcheck::Status s = log_.step(step, values);
    if (!s.ok()) raise_status(s);
  }
  void checkpoint(int64_t step, const std::string& path) {
    ckptcheck::Status s = log_.checkpoint(step, path);
    if (!s.ok()) raise_status(s);
  }

 private:
  ckptcheck::MetricsLog log_;
};

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "ckptcheck's engines (api/ckptcheck.h); use the ckptcheck package, not this module";
  m.def("version", &ckptcheck::version);
  m.def("verify", &verify, py::arg("path"), py::arg("weights_only"), py::arg("allow_globals"),
        py::arg("pubkey"), py::arg("jobs"), py::arg("quick"));
  py::class_<HashingTail>(m, "HashingTail")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def("finish", &HashingTail::finish);
  m.def("seal", &seal, py::arg("path"), py::arg("key"), py::arg("jobs"),
        py::arg("written") = std::vector<const HashingTail*>());
  m.def("inspect", &inspect, py::arg("path"), py::arg("stats"), py::arg("tensor"));
  m.def("drill_run", &drill_run);
  py::class_<MetricsFile>(m, "MetricsFile")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def("step", &MetricsFile::step, py::arg("step"), py::arg("values"))
      .def("checkpoint", &MetricsFile::checkpoint, py::arg("step"), py::arg("path"));
  m.def("diff", &diff, py::arg("a"), py::arg("b"), py::arg("rtol"), py::arg("atol"));
}
