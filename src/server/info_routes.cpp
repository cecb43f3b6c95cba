#include "server/info_routes.h"

#include <fmt/format.h>

#include <string>

#include "server/guards.h"
#include "server/openai_format.h"

namespace rlt::server {
namespace {

json model_object(const ServingState& s) {
  return json{{"id", s.model->name},
              {"object", "model"},
              {"created", 0},
              {"owned_by", "rlt"},
              {"max_model_len", s.model->max_context},
              {"max_loops", s.model->total_loops}};
}

}  // namespace

void add_info_routes(httplib::Server& svr, ServingState& s) {
  svr.Get("/", [&s](const httplib::Request& req, httplib::Response& res) {
    if (auto e = check_host_and_origin(s, req)) return send_error(res, *e);
    res.set_content(chat_page_html(), "text/html; charset=utf-8");
  });
  svr.Get("/health", [&s](const httplib::Request& req, httplib::Response& res) {
    if (auto e = check_host_and_origin(s, req)) return send_error(res, *e);
    if (auto e = check_serving(s)) {
      json body{{"status", "unavailable"}, {"reason", e->code}};
      if (e->retry_after_s > 0) res.set_header("Retry-After", std::to_string(e->retry_after_s));
      return send_json(res, 503, dump_json(body));
    }
    send_json(res, 200, dump_json(json{{"status", "ready"}}));
  });
  svr.Get("/v1/models", [&s](const httplib::Request& req, httplib::Response& res) {
    if (auto e = check_host_and_origin(s, req)) return send_error(res, *e);
    if (auto e = check_auth(s, req)) return send_error(res, *e);
    if (auto e = check_serving(s)) return send_error(res, *e);
    send_json(res, 200,
              dump_json(json{{"object", "list"}, {"data", json::array({model_object(s)})}}));
  });
  // OpenAI's model retrieval (client.models.retrieve); ids may hold slashes ("org/name").
  svr.Get(R"(/v1/models/(.+))", [&s](const httplib::Request& req, httplib::Response& res) {
    if (auto e = check_host_and_origin(s, req)) return send_error(res, *e);
    if (auto e = check_auth(s, req)) return send_error(res, *e);
    if (auto e = check_serving(s)) return send_error(res, *e);
    const std::string id = req.matches[1];
    if (id != s.model->name) {
      ApiError e = not_found_error(
          fmt::format("the model '{}' does not exist: this server serves '{}' (GET /v1/models)",
                      id.substr(0, 200), s.model->name),
          "model_not_found");
      e.param = "model";
      return send_error(res, e);
    }
    send_json(res, 200, dump_json(model_object(s)));
  });
  svr.Get("/v1/attention", [&s](const httplib::Request& req, httplib::Response& res) {
    if (auto e = check_host_and_origin(s, req)) return send_error(res, *e);
    if (auto e = check_auth(s, req)) return send_error(res, *e);
    if (auto e = check_serving(s)) return send_error(res, *e);
    send_json(res, 200, s.worker.attention_info());
  });
  svr.Get("/metrics", [&s](const httplib::Request& req, httplib::Response& res) {
    if (auto e = check_host_and_origin(s, req)) return send_error(res, *e);
    res.set_content(s.metrics.render(), "text/plain; version=0.0.4; charset=utf-8");
  });
}

}  // namespace rlt::server
