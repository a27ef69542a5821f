// report/outputs/export_events.cpp — the event, stack and frame tables of `--export events`
// (export_events.h): one analysis pass per trace, a row per event as it is applied.
#include "report/outputs/export_events.h"

#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "report/analyses/analyze.h"
#include "report/analyses/autograd_attribution.h"
#include "report/analyses/open_scopes.h"
#include "report/analyses/process_analyzer.h"
#include "report/analyses/site.h"
#include "report/outputs/site_line.h"
#include "report/reader/trace_reader.h"
#include "util/ends_with.h"

namespace gpumemtrace::report {

namespace {

// One zstd-compressed file written as rows come: at most kFlushBytes of text are held.
class ZstdFile {
 public:
  explicit ZstdFile(const std::string& path) : path_(path) {
    file_ = std::fopen(path.c_str(), "wb");
    if (!file_) throw std::runtime_error(path + ": cannot write: " + std::strerror(errno));
    cctx_ = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, 3);
  }
  ~ZstdFile() {
    ZSTD_freeCCtx(cctx_);
    if (file_) std::fclose(file_);
  }
  ZstdFile(const ZstdFile&) = delete;
  ZstdFile& operator=(const ZstdFile&) = delete;

  std::string& text() { return text_; }
  void row_done() {
    ++rows_;
    if (text_.size() >= kFlushBytes) compress(ZSTD_e_continue);
  }
  uint64_t rows() const { return rows_; }
  // Ends the frame and closes the file; throws when anything could not be written.
  void close() {
    compress(ZSTD_e_end);
    const bool failed = std::ferror(file_) != 0;
    const int error = errno;
    if (std::fclose(file_) != 0 || failed) {
      file_ = nullptr;
      throw std::runtime_error(path_ + ": cannot write: " + std::strerror(error));
    }
    file_ = nullptr;
  }

 private:
  static constexpr size_t kFlushBytes = 1 << 20;
  void compress(ZSTD_EndDirective mode) {
    ZSTD_inBuffer in{text_.data(), text_.size(), 0};
    char buffer[1 << 16];
    size_t remaining = 0;
    do {
      ZSTD_outBuffer out{buffer, sizeof buffer, 0};
      remaining = ZSTD_compressStream2(cctx_, &out, &in, mode);
      if (ZSTD_isError(remaining)) throw std::runtime_error(path_ + ": zstd: " + ZSTD_getErrorName(remaining));
      if (out.pos && std::fwrite(buffer, 1, out.pos, file_) != out.pos) {
        throw std::runtime_error(path_ + ": cannot write: " + std::strerror(errno));
      }
    } while (mode == ZSTD_e_end ? remaining != 0 : in.pos < in.size);
    text_.clear();
  }

  std::string path_;
  std::FILE* file_ = nullptr;
  ZSTD_CCtx* cctx_ = nullptr;
  std::string text_;
  uint64_t rows_ = 0;
};

void add_string(std::string& out, std::string_view text) {
  out += nlohmann::json(std::string(text)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void add_key(std::string& out, const char* key) {
  out += ",\"";
  out += key;
  out += "\":";
}

void add_text_or_null(std::string& out, const char* key, std::string_view text) {
  add_key(out, key);
  if (text.empty()) out += "null";
  else add_string(out, text);
}

template <typename Number>
void add_number(std::string& out, const char* key, Number value) {
  add_key(out, key);
  out += std::to_string(value);
}

// Addresses as "0x..." text: a JSON number above 2^53 is not exact in every engine.
std::string hex_text(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "\"0x%llx\"", static_cast<unsigned long long>(value));
  return text;
}

// The rows of one trace: forwards everything to the report's analyzer, and writes a row for each event
// once the analyzer has applied it.
class TraceExporter : public TraceHandler, public ModelListener {
 public:
  TraceExporter(const std::string& name, const std::string& base, const SymbolTable& symbols,
                const Suppressions& suppressions)
      : symbols_(symbols),
        analyzer_(symbols, suppressions, false),
        events_(base + ".events.jsonl.zst"),
        stacks_(base + ".stacks.jsonl.zst"),
        frames_(base + ".frames.jsonl.zst") {
    analyzer_.add_model_listener(this);  // after the analyses: role_of() knows what was just acquired
    // The job: the folder the trace lies in (a run's traces share one), by its own name.
    const std::filesystem::path parent = std::filesystem::path(name).parent_path();
    std::filesystem::path folder = std::filesystem::absolute(parent.empty() ? "." : parent).lexically_normal();
    if (folder.filename().empty()) folder = folder.parent_path();
    job_ = name == "-" ? std::string() : folder.filename().string();
  }

  void on_header(const Header& h) override {
    analyzer_.on_header(h);
    header_ = h;
    // The columns every row of this process starts with.
    prefix_ = "{\"job\":";
    if (job_.empty()) prefix_ += "null";
    else add_string(prefix_, job_);
    add_text_or_null(prefix_, "host", h.host);
    add_key(prefix_, "rank");
    prefix_ += h.rank >= 0 ? std::to_string(h.rank) : "null";
    add_number(prefix_, "pid", h.pid);
  }
  void on_device(const DeviceInfo& d) override { analyzer_.on_device(d); }
  void on_dropped(uint64_t count) override { analyzer_.on_dropped(count); }
  void on_footer(const Footer& f) override { analyzer_.on_footer(f); }
  void on_capped(const Capped& c) override {
    analyzer_.on_capped(c);
    capped_ = true;
  }
  void on_live(const Event& e) override { analyzer_.on_live(e); }
  void on_allocator_settings(const Event& e) override { analyzer_.on_allocator_settings(e); }
  void on_gc(const Event& e) override { analyzer_.on_gc(e); }
  void on_pause(const Event& e) override { analyzer_.on_pause(e); }

  void on_acquire(const Holding& h) override {
    const Role role = analyzer_.role_of(h);
    live_roles_[holding_id(h)] = role;
    moved(h, role, +1);
  }
  void on_release(const Holding& h) override {
    auto it = live_roles_.find(holding_id(h));
    Role role = Role::Other;
    if (it != live_roles_.end()) {
      role = it->second;
      live_roles_.erase(it);
    }
    moved(h, role, -1);
  }

  void on_event(const Event& e) override {
    touched_ = false;
    reserved_delta_ = allocated_delta_ = 0;
    analyzer_.on_event(e);
    if ((e.op == Op::ScopeBegin || e.op == Op::ScopeEnd) && e.api != format::kApiNvtx && e.api != kBackwardScopeApi) {
      if (e.op == Op::ScopeBegin) scopes_.begin(OpenScope{std::string(e.label)});
      else scopes_.end(e.label);
    }
    std::string& out = events_.text();
    out += prefix_;
    add_key(out, "device");
    out += e.device >= 0 ? std::to_string(e.device) : "null";
    add_number(out, "n", ++rows_);  // the timeline's order (seq is the recording's: delayed events differ)
    add_number(out, "seq", e.seq);
    add_number(out, "t", e.t);
    add_key(out, "wall_ns");
    out += header_.start_time_ns && e.t >= header_.clock_start_ns
               ? std::to_string(header_.start_time_ns + (e.t - header_.clock_start_ns))
               : "null";
    add_text_or_null(out, "op", format::op_name(e.op));
    add_text_or_null(out, "kind", format::kind_name(e.kind));
    add_text_or_null(out, "api", e.api);
    add_text_or_null(out, "layer", touched_ ? level_name(level_) : "");
    // A free carries no size: the size of what it ended.
    add_number(out, "size", touched_ && !e.size ? size_ : e.size);
    add_key(out, "address");
    out += format::op_has_addr(e.op) ? hex_text(e.addr) : "null";
    add_number(out, "result", e.result);
    add_text_or_null(out, "role", touched_ ? role_name(role_) : "");
    add_text_or_null(out, "scope", scopes_.empty() ? std::string_view() : std::string_view(scopes_.open().back().name));
    add_text_or_null(out, "phase", e.op == Op::Mark ? std::string_view(e.label) : std::string_view(analyzer_.phase()));
    add_text_or_null(out, "label", e.label);
    add_stack(out, "stack", e.stack);
    add_stack(out, "alloc_stack", touched_ ? site_stack(site_) : StackId());
    add_number(out, "reserved_delta", reserved_delta_);
    add_number(out, "allocated_delta", allocated_delta_);
    out += "}\n";
    events_.row_done();
  }

  // The stacks the rows named, and their frames; then every file is closed.
  void finish(ExportResult& result) {
    for (StackId id : stack_ids_) {
      const Stack stack = symbols_.resolve(id);
      std::string& out = stacks_.text();
      out += prefix_;
      add_number(out, "stack", id.value);
      add_text_or_null(out, "site", site_line(stack));
      add_number(out, "depth", stack.size());
      out += "}\n";
      stacks_.row_done();
      for (size_t i = 0; i < stack.size(); ++i) {
        const LogicalFrame& f = stack[i];
        std::string& row = frames_.text();
        row += prefix_;
        add_number(row, "stack", id.value);
        add_number(row, "depth", i);  // 0: innermost
        add_text_or_null(row, "function", f.function);
        add_text_or_null(row, "file", f.file);
        add_key(row, "line");
        row += f.line ? std::to_string(f.line) : "null";
        add_text_or_null(row, "module", f.module);
        add_text_or_null(row, "lang", f.python ? "python" : "native");
        add_key(row, "inlined");
        row += f.inlined ? "true" : "false";
        row += "}\n";
        frames_.row_done();
      }
    }
    events_.close();
    stacks_.close();
    frames_.close();
    result.events += events_.rows();
    result.stacks += stacks_.rows();
    result.frames += frames_.rows();
  }

  bool capped() const { return capped_; }

 private:
  struct OpenScope {
    std::string name;
  };

  // A holding the event acquired (+1) or released (-1): the first one names the row's layer, role and
  // allocation stack; every one counts in the deltas.
  void moved(const Holding& h, Role role, int sign) {
    const int64_t bytes = sign * static_cast<int64_t>(h.size);
    if (h.level == Level::Block) allocated_delta_ += bytes;
    else if (h.level != Level::Host) reserved_delta_ += bytes;
    if (touched_) return;
    touched_ = true;
    level_ = h.level;
    role_ = role;
    size_ = h.size;
    site_ = h.site;
  }

  void add_stack(std::string& out, const char* key, StackId id) {
    add_key(out, key);
    if (!id) {
      out += "null";
      return;
    }
    out += std::to_string(id.value);
    stack_ids_.insert(id);
  }

  const SymbolTable& symbols_;
  ProcessAnalyzer analyzer_;
  ZstdFile events_, stacks_, frames_;
  std::string job_;
  Header header_;
  std::string prefix_;
  std::set<StackId> stack_ids_;
  std::unordered_map<uint64_t, Role> live_roles_;  // by holding_id
  OpenScopes<OpenScope> scopes_;
  uint64_t rows_ = 0;
  bool capped_ = false;
  // What the event being applied moved.
  bool touched_ = false;
  Level level_ = Level::Allocation;
  Role role_ = Role::Other;
  uint64_t size_ = 0;
  SiteId site_ = 0;
  int64_t reserved_delta_ = 0;
  int64_t allocated_delta_ = 0;
};

void export_one(const ExportInput& input, const std::string& base, const Suppressions& suppressions,
                ExportResult& result) {
  std::unique_ptr<ByteSource> source = open_trace_source(input.path);
  SymbolTable symbols;
  TraceExporter exporter(input.name, base, symbols, suppressions);
  ReadResult read = read_trace(*source, input.name, symbols, exporter);
  exporter.finish(result);
  ++result.traces;
  for (const std::string& w : read.warnings) result.warnings.push_back(input.name + ": warning: " + w);
  if (exporter.capped()) {
    result.warnings.push_back(input.name + ": warning: detail stopped at GPUMEMTRACE_MAX_BYTES: the events up to "
                              "the cap are rows; the allocations its live records list after it are not");
  }
}

}  // namespace

std::string export_stem(const std::string& name) {
  std::string stem = std::filesystem::path(name).filename().string();
  for (const char* suffix : {".zst", ".jsonl", ".pickle", ".pkl"}) {
    if (util::ends_with(stem, suffix) && stem.size() > std::strlen(suffix)) stem.resize(stem.size() - std::strlen(suffix));
  }
  return stem == "-" || stem.empty() ? "stdin" : stem;
}

ExportResult export_events(const std::vector<ExportInput>& inputs, const std::string& dir,
                           const Suppressions& suppressions, size_t jobs) {
  std::map<std::string, std::string> stems;  // stem -> the input that has it
  for (const ExportInput& input : inputs) {
    auto [it, added] = stems.emplace(export_stem(input.name), input.name);
    if (!added) {
      throw std::runtime_error(input.name + " and " + it->second + " would both be exported as " + it->first +
                               ".*: export them into different folders");
    }
  }
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw std::runtime_error(dir + ": cannot create the folder: " + error.message());

  // Traces share nothing: up to `jobs` at once, each with its own result; errors in input order.
  std::vector<ExportResult> results(inputs.size());
  std::vector<std::exception_ptr> errors(inputs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < inputs.size(); i = next++) {
      try {
        export_one(inputs[i], (std::filesystem::path(dir) / export_stem(inputs[i].name)).string(), suppressions,
                   results[i]);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> workers;
  try {
    for (size_t t = 1; t < std::min(jobs, inputs.size()); ++t) workers.emplace_back(work);
  } catch (const std::system_error&) {
    // No more threads to be had: those started and this one share the work.
  }
  work();
  for (std::thread& worker : workers) worker.join();
  ExportResult total;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (errors[i]) std::rethrow_exception(errors[i]);
    total.traces += results[i].traces;
    total.events += results[i].events;
    total.stacks += results[i].stacks;
    total.frames += results[i].frames;
    total.warnings.insert(total.warnings.end(), results[i].warnings.begin(), results[i].warnings.end());
  }
  return total;
}

}  // namespace gpumemtrace::report
