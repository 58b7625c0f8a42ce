#include "server/front/service/check_plan.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "core/args/data_type.h"
#include "core/modules/builtin_module.h"

namespace kprof::server {
namespace {

absl::Status CheckTolerance(const char* name, bool present, double value) {
  if (present && !(value >= 0 && std::isfinite(value))) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " ", value, " is not a tolerance (accepted: a finite number >= 0)"));
  }
  return absl::OkStatus();
}

// With expected data: each item fits its output's type and element count.
absl::Status CheckExpected(const kprof::v1::AnswerCheck& check,
                           const std::vector<core::ArgSpec>& specs,
                           const std::vector<int>& outputs) {
  if (static_cast<size_t>(check.expected_size()) != outputs.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(check.expected_size(), " expected output(s) for ", outputs.size(),
                     " output argument(s) (", absl::StrJoin(outputs, ", "),
                     "): give one per output, in order, or name the outputs (outputs, --outputs)"));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const kprof::v1::ExpectedOutput& e = check.expected(static_cast<int>(i));
    const core::ArgSpec& spec = specs[static_cast<size_t>(outputs[i])];
    absl::StatusOr<DLDataType> type = core::ParseDataType(e.dtype());
    int64_t elements = 1;
    for (int64_t d : e.shape()) elements = d < 0 ? -1 : elements * d;
    const std::string described = absl::StrCat(e.dtype(), "[", absl::StrJoin(e.shape(), ", "), "]");
    const std::string argument =
        absl::StrCat("output argument ", outputs[i], " is '", spec.text, "'");
    if (!type.ok() || type->code != spec.dtype.code || type->bits != spec.dtype.bits) {
      return absl::InvalidArgumentError(
          absl::StrCat("expected output ", i, " is ", described, "; ", argument,
                       " (its expected data must have the same type)"));
    }
    if (elements != spec.num_elements) {
      return absl::InvalidArgumentError(absl::StrCat("expected output ", i, " is ", described, " (",
                                                     elements, " elements); ", argument, " (",
                                                     spec.num_elements, " elements)"));
    }
    if (e.data().size() != spec.num_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("expected output ", i, " holds ",
                                                     e.data().size(), " bytes; ", described,
                                                     " takes ", spec.num_bytes));
    }
  }
  return absl::OkStatus();
}

std::string ShortName(const kprof::v1::ReferenceCall& reference) {
  const std::string& id = reference.module_id();
  return absl::StrCat(id == core::kBuiltinModuleName ? id : id.substr(0, 12), ":",
                      reference.function());
}

std::string Number(double value) { return absl::StrFormat("%.9g", value); }

// "argument 0: 12 of 1048576 elements differ beyond rtol 0.0001, atol 1e-05; first at index 3:
// got 0.5, expected 1.25; largest errors abs 0.75, rel 0.6".
std::string DescribeMismatch(const kprof::v1::ArgumentCheck& a) {
  if (a.input()) {
    return absl::StrCat("wrote its input argument ", a.argument(), " (", a.mismatched(), " of ",
                        a.elements(), " elements changed; first at index ", a.first_index(), ": ",
                        Number(a.expected()), " became ", Number(a.got()), ")");
  }
  return absl::StrCat("argument ", a.argument(), ": ", a.mismatched(), " of ", a.elements(),
                      " elements differ beyond rtol ", Number(a.rtol()), ", atol ",
                      Number(a.atol()), "; first at index ", a.first_index(), ": got ",
                      Number(a.got()), ", expected ", Number(a.expected()), "; largest errors abs ",
                      Number(a.max_abs_error()), ", rel ", Number(a.max_rel_error()));
}

void Record(int argument, bool input, const core::ArgumentComparison& c, core::Tolerance t,
            kprof::v1::CheckVerdict* verdict) {
  if (!input) {
    verdict->set_max_abs_error(std::max(verdict->max_abs_error(), c.max_abs_error));
    verdict->set_max_rel_error(std::max(verdict->max_rel_error(), c.max_rel_error));
  }
  if (c.mismatched == 0) return;
  kprof::v1::ArgumentCheck* a = verdict->add_mismatches();
  a->set_argument(argument);
  a->set_input(input);
  a->set_elements(c.elements);
  a->set_mismatched(c.mismatched);
  a->set_first_index(c.first_index);
  a->set_got(c.got);
  a->set_expected(c.expected);
  a->set_max_abs_error(c.max_abs_error);
  a->set_max_rel_error(c.max_rel_error);
  a->set_rtol(t.rtol);
  a->set_atol(t.atol);
}

}  // namespace

ReferenceData ReferenceData::FromAnswer(kprof::worker::v1::WorkerAnswer& answer) {
  ReferenceData data;
  data.bytes = std::move(*answer.mutable_argument_bytes());
  uint64_t offset = 0;
  for (uint64_t size : answer.arguments().sizes()) {
    data.offsets.push_back(offset);
    data.sizes.push_back(size);
    offset += size;
  }
  data.changed.assign(answer.arguments().changed().begin(), answer.arguments().changed().end());
  data.changed.resize(data.sizes.size(), false);
  data.initial_offsets.assign(data.sizes.size(), -1);
  for (uint32_t k : answer.arguments().initial()) {  // in range: ReadArgumentFile checked
    data.initial_offsets[k] = static_cast<int64_t>(offset);
    offset += data.sizes[k];
  }
  return data;
}

absl::StatusOr<CheckPlan> CheckPlan::Make(const kprof::v1::AnswerCheck& check,
                                          const kprof::v1::FunctionCall& call) {
  CheckPlan plan;
  plan.check_ = check;
  const bool has_reference = check.has_reference() && !check.reference().function().empty();
  if (has_reference == (check.expected_size() > 0)) {
    return absl::InvalidArgumentError(
        has_reference ? "a check with both a reference function and expected data: give one"
                      : "a check without a reference: give a reference function (module and "
                        "function) or expected data (one per output)");
  }
  if (has_reference && check.reference().module_id().empty()) {
    return absl::InvalidArgumentError(
        "the reference names no module (a module id the client holds, or \"builtin\")");
  }
  if (check.level() == kprof::v1::AnswerCheck::STRICT && !has_reference) {
    return absl::InvalidArgumentError(
        "strict checks need a reference function: they draw inputs of their own, and expected "
        "data answer one set of inputs");
  }
  if (check.bitwise() && check.level() != kprof::v1::AnswerCheck::STRICT) {
    return absl::InvalidArgumentError(
        "bitwise compares the checked calls on the same inputs, which strict checks make: ask "
        "for checks strict with it");
  }
  if (!kprof::v1::AnswerCheck::Level_IsValid(check.level())) {
    return absl::InvalidArgumentError(
        absl::StrCat("check level ", check.level(), " is not known (accepted: BASIC, STRICT)"));
  }
  KPROF_RETURN_IF_ERROR(CheckTolerance("rtol", check.has_rtol(), check.rtol()));
  KPROF_RETURN_IF_ERROR(CheckTolerance("atol", check.has_atol(), check.atol()));
  for (const std::string& text : call.args()) {
    KPROF_ASSIGN_OR_RETURN(core::ArgSpec spec, core::ParseArgSpec(text));
    plan.specs_.push_back(std::move(spec));
  }
  const int count = static_cast<int>(plan.specs_.size());
  std::vector<bool> seen(plan.specs_.size(), false);
  for (int k : check.outputs()) {
    if (k < 0 || k >= count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output ", k, " is no argument of the call (it has ", count, ": 0 to ", count - 1, ")"));
    }
    if (seen[static_cast<size_t>(k)]) {
      return absl::InvalidArgumentError(absl::StrCat("output ", k, " is named twice"));
    }
    seen[static_cast<size_t>(k)] = true;
  }
  if (has_reference) {
    plan.reference_name_ = ShortName(check.reference());
    return plan;
  }
  plan.reference_name_ = "expected data";
  if (check.outputs_size() == 0) {
    for (int k = 0; k < count; ++k) {
      const core::ArgSpec& spec = plan.specs_[static_cast<size_t>(k)];
      if (!spec.shape.empty() && spec.init == core::ArgInit::kZeros) {
        plan.default_outputs_.push_back(k);
      }
    }
  }
  KPROF_RETURN_IF_ERROR(CheckExpected(
      check, plan.specs_,
      check.outputs_size() > 0 ? std::vector<int>(check.outputs().begin(), check.outputs().end())
                               : plan.default_outputs_));
  return plan;
}

kprof::v1::FunctionCall CheckPlan::ReferenceRun(const kprof::v1::FunctionCall& candidate) const {
  kprof::v1::FunctionCall run;
  *run.mutable_args() = candidate.args();
  run.set_module_id(std::string(core::kBuiltinModuleName));
  if (expected_data()) return run;
  const kprof::v1::ReferenceCall& r = check_.reference();
  run.set_module_id(r.module_id());
  run.set_function(r.function());
  if (r.grid_size() > 0 || r.block_size() > 0) {
    *run.mutable_launch()->mutable_grid() = r.grid();
    *run.mutable_launch()->mutable_block() = r.block();
    run.mutable_launch()->set_shared_bytes(r.shared_bytes());
  } else if (candidate.has_launch() && r.module_id() != core::kBuiltinModuleName) {
    *run.mutable_launch() = candidate.launch();  // a kernel like the candidate, launched alike
  }
  return run;
}

std::vector<int> CheckPlan::Outputs(const ReferenceData& reference) const {
  if (check_.outputs_size() > 0) return {check_.outputs().begin(), check_.outputs().end()};
  if (expected_data()) return default_outputs_;
  std::vector<int> changed;
  for (size_t k = 0; k < reference.changed.size(); ++k) {
    if (reference.changed[k]) changed.push_back(static_cast<int>(k));
  }
  return changed;
}

core::Tolerance CheckPlan::ToleranceOf(const core::ArgSpec& spec) const {
  core::Tolerance t = core::DefaultTolerance(spec.dtype);
  if (!core::IsFloat(spec.dtype)) return t;  // integers and bool: exactly
  if (check_.has_rtol()) t.rtol = check_.rtol();
  if (check_.has_atol()) t.atol = check_.atol();
  return t;
}

absl::Status CheckPlan::CheckWritten(const ReferenceData& reference,
                                     absl::Span<const uint32_t> written, const std::string& what,
                                     kprof::v1::CheckVerdict* verdict) const {
  const std::vector<int> outputs = Outputs(reference);
  for (const uint32_t k : written) {
    if (k >= specs_.size() ||
        std::find(outputs.begin(), outputs.end(), static_cast<int>(k)) != outputs.end() ||
        (k < reference.changed.size() && reference.changed[k])) {
      continue;
    }
    verdict->set_outcome(kprof::v1::CheckVerdict::WRONG);
    kprof::v1::ArgumentCheck* input = verdict->add_mismatches();
    input->set_argument(static_cast<int32_t>(k));
    input->set_input(true);
    input->set_elements(specs_[k].num_elements);
    absl::Status wrong =
        absl::AbortedError(absl::StrCat("wrong answer: ", what, " wrote its input argument ", k,
                                        " (the reference leaves it as it is) on its first call"));
    wrong.SetPayload(kCheckVerdictType, absl::Cord(verdict->SerializeAsString()));
    return wrong;
  }
  return absl::OkStatus();
}

absl::Status CheckPlan::Judge(const ReferenceData& reference, SentArguments sent,
                              const std::string& what, kprof::v1::CheckVerdict* verdict) const {
  verdict->set_reference(reference_name_);
  if (sent.sizes.size() != specs_.size() || reference.sizes.size() != specs_.size()) {
    return absl::InternalError(absl::StrCat("the checked call sent ", sent.sizes.size(),
                                            " arguments back for ", specs_.size()));
  }
  const std::vector<int> outputs = Outputs(reference);
  if (outputs.empty()) {
    verdict->set_outcome(kprof::v1::CheckVerdict::REFERENCE_FAILED);
    verdict->set_reference_error("it changed none of the arguments");
    return absl::FailedPreconditionError(absl::StrCat(
        "the reference ", reference_name_, " changed none of the ", specs_.size(),
        " arguments, so there is no output to compare: name the outputs (outputs, --outputs)"));
  }
  for (int k : outputs) verdict->add_outputs(k);
  std::vector<std::string_view> got;
  for (size_t k = 0, at = 0; k < specs_.size(); ++k) {
    if (sent.Unsent(k)) {
      // Left as it was: the initial data, which are the reference's before its call.
      const std::optional<std::string_view> initial = reference.Initial(k);
      if (!initial.has_value() || initial->size() != specs_[k].num_bytes) {
        return absl::InternalError(absl::StrCat("argument ", k,
                                                " came back as it was, and the "
                                                "reference's run kept no initial data of it"));
      }
      got.push_back(*initial);
      continue;
    }
    if (sent.sizes[k] != specs_[k].num_bytes || at + specs_[k].num_bytes > sent.bytes.size()) {
      return absl::InternalError(absl::StrCat("the checked call sent argument ", k, " back as ",
                                              sent.sizes[k], " bytes; '", specs_[k].text,
                                              "' takes ", specs_[k].num_bytes));
    }
    got.push_back(sent.bytes.substr(at, specs_[k].num_bytes));
    at += specs_[k].num_bytes;
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto k = static_cast<size_t>(outputs[i]);
    const core::ArgSpec& spec = specs_[k];
    const std::string_view want =
        expected_data() ? std::string_view(check_.expected(static_cast<int>(i)).data())
                        : reference.Argument(k);
    const core::Tolerance t = ToleranceOf(spec);
    Record(outputs[i], false,
           core::CompareOutput({spec.dtype, spec.num_elements, got[k]},
                               {spec.dtype, spec.num_elements, want}, t),
           t, verdict);
  }
  for (size_t k = 0; k < specs_.size(); ++k) {
    // An input must come back as it went in; one the reference itself changed without being
    // named an output is its workspace, and not compared.
    // One left out came back as it was.
    if (std::find(outputs.begin(), outputs.end(), static_cast<int>(k)) != outputs.end() ||
        reference.changed[k] || sent.Unsent(k)) {
      continue;
    }
    Record(static_cast<int>(k), true,
           core::CompareInput({specs_[k].dtype, specs_[k].num_elements, got[k]},
                              {specs_[k].dtype, specs_[k].num_elements, reference.Argument(k)}),
           {}, verdict);
  }
  if (verdict->mismatches_size() == 0) {
    verdict->set_outcome(kprof::v1::CheckVerdict::PASSED);
    return absl::OkStatus();
  }
  verdict->set_outcome(kprof::v1::CheckVerdict::WRONG);
  std::vector<std::string> parts;
  for (const kprof::v1::ArgumentCheck& a : verdict->mismatches())
    parts.push_back(DescribeMismatch(a));
  absl::Status wrong = absl::AbortedError(absl::StrCat(
      "wrong answer: ", what, " against ", reference_name_, ": ", absl::StrJoin(parts, "; ")));
  wrong.SetPayload(kCheckVerdictType, absl::Cord(verdict->SerializeAsString()));
  return wrong;
}

}  // namespace kprof::server
