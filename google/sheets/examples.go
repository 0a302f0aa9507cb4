package sheets

// examples are requests people make that each tool does (indexed by
// find_tools, never sent to the model).
var examples = map[string][]string{
	"sheets_create": {"make a new table in google sheets", "create a new spreadsheet", "start a google sheet for the budget"},
	"sheets_info":   {"what tabs does the spreadsheet have", "how many rows and columns are in the sheet"},
	"sheets_read":   {"how much is the total in the spreadsheet", "sum of a column in my sheet", "read the values in the spreadsheet", "what does column B of the sheet contain", "show me the numbers in the budget table", "get the figures from the sheet"},
	"sheets_write":  {"log today's numbers in the sheet", "update a cell in the tracker", "write values into cells of the sheet", "add a new row to the spreadsheet", "record an entry in my tracking sheet", "set a cell to a number"},
	"sheets_clear":  {"clear a range of cells", "erase the values in the sheet but keep the tab"},
	"sheets_tabs":   {"add a new tab to the spreadsheet", "rename a sheet tab", "delete a tab from the workbook"},
}
