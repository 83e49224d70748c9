#include "serve/search_report.h"

#include "common/text.h"
#include "evolve/report.h"
#include "serve/page.h"

namespace kevo::serve {

std::string search_report_html(store::Store& st) {
    const std::string name = st.get_meta("task_name").value_or("?").get<std::string>();
    return report_page("KernelEvo search: " + name, "<h1>KernelEvo search: " + xml_escape(name) + "</h1>\n",
                       evolve::report_charts(st), "<pre>" + xml_escape(evolve::report_text(st)) + "</pre>\n");
}

}  // namespace kevo::serve
