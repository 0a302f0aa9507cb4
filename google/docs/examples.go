package docs

// examples are requests people make that each tool does (indexed by
// find_tools, never sent to the model).
var examples = map[string][]string{
	"docs_create":   {"write a new google doc from these notes", "make a document called minutes", "create a new google doc", "start a document with this text"},
	"docs_read":     {"what is in the google doc", "read me the document text", "read the google doc", "what does the document say about the deadline", "show the text of the doc"},
	"docs_write":    {"add text to the end of the doc", "insert a paragraph after the introduction", "write a new section in the document"},
	"docs_replace":  {"replace a word everywhere in the doc", "find and replace the old name in the document", "correct a misspelling throughout the doc"},
	"docs_comments": {"show the comments on the document", "what did reviewers say in the doc", "list the feedback left on the doc"},
}
