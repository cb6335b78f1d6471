// keep_last.cpp: the README's keep-last engine in C++17, through rampart_engine.h.
//
// Keeps the newest `keep` messages (plugins.toml config `keep`, default 50) without separating
// a tool call from its results. Messages are returned as the exact bytes they arrived as; a
// small JSON reader over std::string_view finds them. No exception crosses the C boundary:
// every entry point catches everything and answers a status.
//
// Build (from the repository's root):
//   c++ -std=c++17 -O2 -shared -fPIC -I engine-api/include
//       examples/engines/cpp/keep_last.cpp -o libkeep_last_cpp.so
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rampart_engine.h"

namespace {

// Reads JSON values by position; throws BadJson on malformed input.
struct BadJson {};

class Reader {
   public:
    explicit Reader(std::string_view text) : s_(text) {}

    // The extent of the value starting at `at` (after whitespace): [begin, end).
    std::pair<size_t, size_t> value(size_t at, int depth = 0) const {
        at = ws(at);
        if (at >= s_.size() || depth > 200) throw BadJson{};
        size_t begin = at;
        char c = s_[at];
        if (c == '"') return {begin, string_end(at)};
        if (c == '{' || c == '[') {
            const char close = c == '{' ? '}' : ']';
            at = ws(at + 1);
            if (at < s_.size() && s_[at] == close) return {begin, at + 1};
            for (;;) {
                if (c == '{') {
                    at = ws(string_end(ws(at)));
                    if (at >= s_.size() || s_[at] != ':') throw BadJson{};
                    ++at;
                }
                at = ws(value(at, depth + 1).second);
                if (at >= s_.size()) throw BadJson{};
                if (s_[at] == ',') {
                    ++at;
                    continue;
                }
                if (s_[at] == close) return {begin, at + 1};
                throw BadJson{};
            }
        }
        while (at < s_.size() && s_[at] != 0 && std::strchr("+-.0123456789eEtrufalsn", s_[at])) ++at;
        if (at == begin) throw BadJson{};
        return {begin, at};
    }

    // The start of member `key`'s value in the object at `obj`, if it has one.
    std::optional<size_t> member(size_t obj, std::string_view key) const {
        obj = ws(obj);
        if (obj >= s_.size() || s_[obj] != '{') throw BadJson{};
        size_t at = ws(obj + 1);
        if (at < s_.size() && s_[at] == '}') return std::nullopt;
        for (;;) {
            size_t k = ws(at);
            size_t k_end = string_end(k);
            at = ws(k_end);
            if (at >= s_.size() || s_[at] != ':') throw BadJson{};
            at = ws(at + 1);
            if (s_.substr(k + 1, k_end - k - 2) == key) return at;
            at = ws(value(at).second);
            if (at < s_.size() && s_[at] == ',') {
                ++at;
                continue;
            }
            if (at < s_.size() && s_[at] == '}') return std::nullopt;
            throw BadJson{};
        }
    }

    // The elements of the array at `at`.
    std::vector<std::pair<size_t, size_t>> elements(size_t at) const {
        std::vector<std::pair<size_t, size_t>> out;
        at = ws(at);
        if (at >= s_.size() || s_[at] != '[') throw BadJson{};
        at = ws(at + 1);
        if (at < s_.size() && s_[at] == ']') return out;
        for (;;) {
            auto extent = value(at);
            out.push_back(extent);
            at = ws(extent.second);
            if (at < s_.size() && s_[at] == ',') {
                ++at;
                continue;
            }
            if (at < s_.size() && s_[at] == ']') return out;
            throw BadJson{};
        }
    }

    // The raw text of the string at `at`, without its quotes; empty if it is no string.
    std::string_view raw_string(std::optional<size_t> at) const {
        if (!at || *at >= s_.size() || s_[*at] != '"') return {};
        return s_.substr(*at + 1, string_end(*at) - *at - 2);
    }

    char at(size_t i) const { return i < s_.size() ? s_[i] : '\0'; }
    std::string_view slice(std::pair<size_t, size_t> e) const { return s_.substr(e.first, e.second - e.first); }

   private:
    size_t ws(size_t at) const {
        while (at < s_.size() && (s_[at] == ' ' || s_[at] == '\n' || s_[at] == '\r' || s_[at] == '\t')) ++at;
        return at;
    }
    size_t string_end(size_t at) const {
        if (at >= s_.size() || s_[at] != '"') throw BadJson{};
        for (++at; at < s_.size(); ++at) {
            if (s_[at] == '\\') ++at;
            else if (s_[at] == '"') return at + 1;
        }
        throw BadJson{};
    }
    std::string_view s_;
};

struct Engine {
    size_t keep = 50;
};

struct Message {
    std::pair<size_t, size_t> extent;
    std::string_view answers;  // a toolResult's toolCallId, else empty
    std::vector<std::string_view> calls;  // an assistant's toolCall ids
};

constexpr const char kInfo[] =
    R"j({"id":"keep-last","name":"Keep last N (C++)","version":"0.1.0",)j"
    R"j("protocol":{"protocol":"rampart-engine","version":"1.0.0","features":[]}})j";

rampart_status answer(const std::string& text, char** out, size_t* out_len) {
    char* buf = static_cast<char*>(std::malloc(text.size() ? text.size() : 1));
    if (!buf) return RAMPART_ENGINE;
    std::memcpy(buf, text.data(), text.size());
    *out = buf;
    *out_len = text.size();
    return RAMPART_OK;
}

rampart_status fail(rampart_status status, const std::string& why, char** out, size_t* out_len) {
    answer(why, out, out_len);
    return status;
}

std::string assemble(const Engine& engine, const Reader& r, bool& invalid) {
    std::vector<Message> messages;
    if (auto list = r.member(0, "messages")) {
        if (r.at(*list) != '[') {
            invalid = true;
            return "`messages` must be an array";
        }
        for (auto extent : r.elements(*list)) {
            if (r.at(extent.first) != '{') {
                invalid = true;
                return "each message must be an object";
            }
            Message m{extent, {}, {}};
            auto role = r.raw_string(r.member(extent.first, "role"));
            if (role == "toolResult") m.answers = r.raw_string(r.member(extent.first, "toolCallId"));
            if (role == "assistant") {
                auto content = r.member(extent.first, "content");
                if (content && r.at(*content) == '[') {
                    for (auto block : r.elements(*content)) {
                        if (r.at(block.first) == '{' && r.raw_string(r.member(block.first, "type")) == "toolCall")
                            m.calls.push_back(r.raw_string(r.member(block.first, "id")));
                    }
                }
            }
            messages.push_back(std::move(m));
        }
    }
    // Units as rampart_engine_api::pairing::tool_units; keep the newest whole units that fit.
    std::vector<size_t> starts;
    for (size_t i = 0; i < messages.size();) {
        const Message& opener = messages[i];
        starts.push_back(i++);
        auto answers_opener = [&](const Message& m) {
            for (auto id : opener.calls)
                if (!m.answers.empty() && id == m.answers) return true;
            return false;
        };
        while (i < messages.size() && answers_opener(messages[i])) ++i;
    }
    size_t n = messages.size(), start = n;
    for (auto it = starts.rbegin(); it != starts.rend() && n - *it <= engine.keep; ++it) start = *it;
    std::string out = "{\"messages\":[";
    for (size_t i = start; i < n; ++i) {
        if (i > start) out += ',';
        out += r.slice(messages[i].extent);
    }
    out += "],\"estimatedTokens\":0}";
    return out;
}

rampart_status create(const char* init_json, size_t init_len, const rampart_host*, void** instance,
                      char** error, size_t* error_len) {
    try {
        auto engine = new Engine();
        Reader r(std::string_view(init_json, init_len));
        if (auto config = r.member(0, "config"); config && r.at(*config) == '{') {
            if (auto keep = r.member(*config, "keep")) {
                auto text = r.slice(r.value(*keep));
                char* end = nullptr;
                std::string digits(text);
                unsigned long long n = std::strtoull(digits.c_str(), &end, 10);
                if (digits.empty() || *end != '\0') {
                    delete engine;
                    return fail(RAMPART_INVALID_PARAMS, "config.keep must be a whole number", error, error_len);
                }
                engine->keep = static_cast<size_t>(n);
            }
        }
        *instance = engine;
        return RAMPART_OK;
    } catch (const BadJson&) {
        return fail(RAMPART_INVALID_PARAMS, "the init JSON is malformed", error, error_len);
    } catch (...) {
        return fail(RAMPART_ENGINE, "create failed", error, error_len);
    }
}

rampart_status call(void* instance, const char* method, const char* json_in, size_t len,
                    const rampart_call_ctx*, char** out, size_t* out_len) {
    const std::string_view name(method);
    try {
        if (name == "assemble") {
            bool invalid = false;
            std::string text = assemble(*static_cast<Engine*>(instance), Reader({json_in, len}), invalid);
            return invalid ? fail(RAMPART_INVALID_PARAMS, text, out, out_len) : answer(text, out, out_len);
        }
        if (name == "ingest") return answer(R"({"ingested":false})", out, out_len);
        if (name == "compact") return answer(R"({"ok":true,"compacted":false})", out, out_len);
        if (name == "dispose") return RAMPART_OK;
        return RAMPART_UNSUPPORTED;
    } catch (const BadJson&) {
        return fail(RAMPART_INVALID_PARAMS, "the parameters are not well-formed JSON", out, out_len);
    } catch (const std::bad_alloc&) {
        return RAMPART_ENGINE;
    } catch (...) {
        return fail(RAMPART_ENGINE, "unexpected C++ exception", out, out_len);
    }
}

void free_buffer(char* buf, size_t) { std::free(buf); }

void destroy(void* instance) { delete static_cast<Engine*>(instance); }

constexpr rampart_engine_table_v1 kTable = {
    RAMPART_ENGINE_ABI_VERSION, kInfo, create, call, free_buffer, destroy,
};

}  // namespace

extern "C" const rampart_engine_table_v1* rampart_engine_v1(void) { return &kTable; }
