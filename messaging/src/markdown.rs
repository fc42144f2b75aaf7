//! A safe subset of Markdown (CommonMark) to HTML. Whatever the text holds, the HTML
//! holds no markup of its own: raw HTML (blocks and inline) is escaped and shown as
//! text, a link keeps its target only for `http`, `https` and `mailto` (another
//! scheme, `javascript:` included, keeps the text without the link), and an image is
//! shown as its alternative text.

use pulldown_cmark::{CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};

fn safe_destination(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://") || lower.starts_with("mailto:")
}

/// Renders `text` to HTML.
///
/// ```
/// use messaging::render;
/// assert_eq!(render("**Heads up**"), "<p><strong>Heads up</strong></p>\n");
/// assert_eq!(render("<script>alert(1)</script>"), "&lt;script&gt;alert(1)&lt;/script&gt;");
/// assert_eq!(render("[x](javascript:alert(1))"), "<p>x</p>\n");
/// assert_eq!(render("[docs](https://example.com)"), "<p><a href=\"https://example.com\">docs</a></p>\n");
/// assert_eq!(render("![alt](https://example.com/i.png)"), "<p>alt</p>\n");
/// ```
pub fn render(text: &str) -> String {
    let mut skipping_links: Vec<bool> = Vec::new();
    let events = Parser::new_ext(text, Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES)
        .filter_map(|event| match event {
            // Raw HTML is shown as the text it is.
            Event::Html(html) | Event::InlineHtml(html) => Some(Event::Text(html)),
            // An image is its alternative text (the events between start and end).
            Event::Start(Tag::Image { .. }) | Event::End(TagEnd::Image) => None,
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }) => {
                let safe = link_type == LinkType::Email || safe_destination(&dest_url);
                skipping_links.push(!safe);
                safe.then(|| {
                    let dest_url = if link_type == LinkType::Email {
                        CowStr::from(format!("mailto:{dest_url}"))
                    } else {
                        dest_url
                    };
                    Event::Start(Tag::Link {
                        link_type: LinkType::Inline,
                        dest_url,
                        title,
                        id,
                    })
                })
            }
            Event::End(TagEnd::Link) => match skipping_links.pop() {
                Some(true) => None,
                _ => Some(Event::End(TagEnd::Link)),
            },
            other => Some(other),
        });
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, events);
    html
}
