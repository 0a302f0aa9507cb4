package whatsapp

import "loadout/bridge"

// Format converts the Markdown a model writes into WhatsApp's
// formatting: bold becomes *bold*, italic _italic_, strike-through
// ~strike~, headings bold lines, "*" and "+" bullets "- " (WhatsApp's
// own), and links "text (url)". Code blocks become WhatsApp's ```
// monospace blocks without their language tag; inline code, quotes and
// numbered lists are WhatsApp's own already. It never makes a text
// longer.
func Format(md string) string {
	return bridge.Markup{
		Rule:   "———",
		Bullet: "- ",
		Link: func(text, url string) string {
			if text == url || "mailto:"+text == url {
				return url
			}
			return text + " (" + url + ")"
		},
	}.Convert(md)
}
